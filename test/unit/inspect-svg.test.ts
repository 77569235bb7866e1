import { beforeAll, describe, expect, it } from "vitest";
import { machineGraph, type MachineGraph } from "../../runtime/charts/graph.js";
import { transitionLabel } from "../../runtime/charts/layout.js";
import { escapeXml, statechartSvg } from "../../runtime/charts/svg.js";
import { machines } from "../../runtime/charts/registry.js";

describe("statechart SVG of every machine", () => {
  for (const { name, machine } of machines) {
    it(`draws ${name}: every state once, every transition with its label, boxes nested inside their parents`, async () => {
      const graph = machineGraph(machine);
      const svg = await statechartSvg(graph);
      expect(svg).toMatch(new RegExp(`^<svg [^>]*data-machine="${graph.id}"`));
      for (const state of graph.states) expect(svg.split(`data-state="${escapeXml(state.id)}"`).length - 1).toBe(1);
      const edges = [...svg.matchAll(/<g class="transition"/g)];
      expect(edges.length).toBe(graph.transitions.length);
      for (const t of graph.transitions) expect(svg).toContain(`>${escapeXml(transitionLabel(t))}</text>`);
      // A child's rectangle lies inside its parent's.
      const rect = (id: string) => {
        const m = new RegExp(
          `data-state="${escapeXml(id).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"><title>[^<]*</title>\\s*<rect x="([\\d.-]+)" y="([\\d.-]+)" width="([\\d.]+)" height="([\\d.]+)"`,
        ).exec(svg);
        return m ? m.slice(1).map(Number) : undefined;
      };
      for (const state of graph.states.filter((s) => s.parent !== undefined)) {
        const [x, y, w, h] = rect(state.id) ?? [];
        const [px, py, pw, ph] = rect(state.parent as string) ?? [];
        expect(x! >= px! && y! >= py! && x! + w! <= px! + pw! && y! + h! <= py! + ph!, `${state.id} inside ${state.parent}`).toBe(true);
      }
    });
  }

  it("draws the task machine's CONTINUATION states inside running", async () => {
    const svg = await statechartSvg(machineGraph(machines.find((m) => m.name === "task")!.machine));
    for (const id of ["task.running.awaitingSubtask", "task.running.awaitingEvaluation", "task.running.awaitingInput"])
      expect(svg).toContain(`data-state="${id}"`);
  });
});

describe("statechart SVG of hostile names", () => {
  const evil = `<script>alert(1)</script>"&'<img src=x onerror=window.__xss=1>`;
  const graph: MachineGraph = {
    id: `m${evil}`,
    states: [
      {
        id: `m${evil}`,
        key: `m${evil}`,
        initial: `a${evil}`,
        type: "compound",
        description: evil,
        tags: [evil],
        entry: [],
        exit: [],
        invokes: [],
      },
      {
        id: `m${evil}.a${evil}`,
        key: `a${evil}`,
        parent: `m${evil}`,
        type: "atomic",
        description: evil,
        tags: [],
        entry: [],
        exit: [],
        invokes: [],
      },
      { id: `m${evil}.b`, key: "b", parent: `m${evil}`, type: "final", tags: [], entry: [], exit: [], invokes: [] },
    ],
    transitions: [
      { source: `m${evil}.a${evil}`, target: `m${evil}.b`, event: `go${evil}`, guard: `ok${evil}`, actions: [] },
      { source: `m${evil}.a${evil}`, target: `m${evil}.a${evil}`, event: `stay${evil}`, actions: [], targetless: true },
    ],
  };
  let svg = "";
  beforeAll(async () => {
    svg = await statechartSvg(graph);
  });

  it("embeds every name as escaped text: no element, attribute or quote comes from a name", () => {
    expect(svg).not.toContain("<script");
    expect(svg).not.toContain("<img");
    expect(svg).not.toMatch(/"&'/);
    // Every '&' starts an entity; every tag is one the generator draws.
    expect(svg.replace(/&(amp|lt|gt|quot|#39);/g, "")).not.toContain("&");
    const tags = new Set([...svg.matchAll(/<\/?([a-zA-Z]+)/g)].map((m) => m[1]));
    expect([...tags].sort()).toEqual(["circle", "defs", "g", "marker", "path", "rect", "svg", "text", "title"]);
    // Attributes are only the generator's own, each with a quoted value free of quotes.
    const attrs = new Set([...svg.matchAll(/\s([a-zA-Z-]+)="[^"<]*"/g)].map((m) => m[1]));
    for (const name of attrs)
      expect(name).toMatch(
        /^(xmlns|class|data-[a-z]+|viewBox|width|height|x|y|rx|d|marker-end|text-anchor|id|refX|refY|markerWidth|markerHeight|orient|cx|cy|r)$/,
      );
  });

  it("keeps the names readable once parsed: state ids, events and the label come back as written", () => {
    const unescape = (text: string) =>
      text.replace(/&(lt|gt|quot|#39|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', "#39": "'", amp: "&" })[e] ?? "");
    const states = [...svg.matchAll(/data-state="([^"]*)"/g)].map((m) => unescape(m[1] ?? ""));
    expect(states).toEqual(graph.states.map((s) => s.id));
    const events = [...svg.matchAll(/data-event="([^"]*)"/g)].map((m) => unescape(m[1] ?? ""));
    expect(events).toEqual([`go${evil}`, `stay${evil}`]);
    expect(svg).toContain(`>${escapeXml(`go${evil} [ok${evil}]`)}</text>`);
    expect(svg).toMatch(new RegExp(`^<svg [^>]*data-machine="${escapeXml(graph.id).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"`));
  });
});
