/**
 * Every machine's chart as the inspector page draws it in headless Debian Chromium (playwright-core, no browser
 * download), served by `dirigent inspect` against a real nats-server: the state boxes and names, the transitions'
 * routes and the label texts are measured in the page (`getBBox`, and `getPointAtLength` along each route) in the real
 * font, and break none of the rules of test/support/chart-geometry.ts — no two labels overlap, no edge runs through a
 * state box it does not enter, through another transition's label or through a state's name, no label lies on a
 * state box or a name.
 */
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { machineGraph } from "../../runtime/charts/graph.js";
import { machines } from "../../runtime/charts/registry.js";
import type { Box } from "../../runtime/charts/geometry.js";
import { chartProblems, type DrawnEdge } from "../support/chart-geometry.js";
import { launchChromium } from "../support/chromium.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

/** One chart as measured in the page, in the SVG's own units. */
interface Measured {
  machine: string;
  states: Array<{ id: string; box: Box; name: Box }>;
  edges: Array<{ source?: string; target: string; text?: string; points: Array<{ x: number; y: number }>; label?: Box }>;
}

/**
 * Page script: every chart of the gallery measured ({@link Measured}[]). A route is sampled every 2 units of its
 * length (and at its end), so curves and corners are followed as drawn; samples along one straight run are merged. Written as text: the test's TypeScript has no
 * DOM types.
 */
const MEASURE_CHARTS = `(() => {
  const rect = (e) => {
    const b = e.getBBox();
    return { x: b.x, y: b.y, width: b.width, height: b.height };
  };
  const route = (path) => {
    const length = path.getTotalLength();
    const points = [];
    const add = ({ x, y }) => {
      const [a, b] = points.slice(-2);
      // A point straight on from the last two (same line, same way) extends the last run instead of adding one.
      const straight = b && a && Math.abs((b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x)) < 0.01 && (b.x - a.x) * (x - b.x) + (b.y - a.y) * (y - b.y) >= 0;
      if (straight) points[points.length - 1] = { x, y };
      else points.push({ x, y });
    };
    for (let at = 0; at < length; at += 2) add(path.getPointAtLength(at));
    add(path.getPointAtLength(length));
    return points;
  };
  return [...document.querySelectorAll("#machines svg[data-machine]")].map((svg) => ({
    machine: svg.dataset.machine,
    states: [...svg.querySelectorAll("g.state")].map((g) => ({
      id: g.dataset.state,
      box: rect(g.querySelector(":scope > rect")),
      name: rect(g.querySelector(":scope > text")),
    })),
    edges: [
      ...[...svg.querySelectorAll("g.transition")].map((g) => ({
        source: g.dataset.source,
        target: g.dataset.target,
        text: g.querySelector("text").textContent,
        points: route(g.querySelector("path")),
        label: rect(g.querySelector("text")),
      })),
      // An initial marker's arrow, where the chart names the state it points to.
      ...[...svg.querySelectorAll("g.initial[data-target]")].map((g) => ({ target: g.dataset.target, points: route(g.querySelector("path")) })),
    ],
  }));
})()`;

let nats: TestNatsServer;
let inspector: CliProcess;
let browser: Browser;
let pageUrl = "";

beforeAll(async () => {
  browser = await launchChromium();
  nats = await startTestNatsServer();
  inspector = startCli(["inspect", "--port", "0", "--nats", nats.url, "--prefix", randomRoot()]);
  [, pageUrl = ""] = await inspector.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/);
});

afterAll(async () => {
  await browser?.close();
  await inspector?.stop();
  await nats?.stop();
});

describe("the inspector's charts in a browser", () => {
  it("draws every machine with no overlapping label and no edge through a box or a label, as measured in the page", async () => {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    await page.goto(pageUrl);
    await page.waitForSelector("body[data-ready=true]");
    const measured = (await page.evaluate(MEASURE_CHARTS)) as Measured[];
    expect(measured.map((m) => m.machine)).toEqual(machines.map((m) => m.machine.id));
    const problems: string[] = [];
    for (const chart of measured) {
      const graph = machineGraph(machines.find((m) => m.machine.id === chart.machine)!.machine);
      expect(chart.states.map((s) => s.id)).toEqual(graph.states.map((s) => s.id));
      expect(chart.edges.filter((e) => e.label).length).toBe(graph.transitions.length);
      // Every label is drawn: text of the real font, with a size.
      for (const e of chart.edges) if (e.label) expect(e.label.width * e.label.height, e.text).toBeGreaterThan(0);
      const edges: DrawnEdge[] = chart.edges.map((e) => ({
        ...e,
        name: `${e.source ?? "initial"} → ${e.target}${e.text === undefined ? "" : ` (${e.text})`}`,
      }));
      const geometry = {
        states: new Map(chart.states.map((s) => [s.id, s.box])),
        names: new Map(chart.states.map((s) => [s.id, s.name])),
        parents: new Map(graph.states.map((s) => [s.id, s.parent])),
        edges,
      };
      problems.push(...chartProblems(geometry).map((p) => `${chart.machine}: ${p}`));
    }
    expect(problems).toEqual([]);
    await page.close();
  });
});
