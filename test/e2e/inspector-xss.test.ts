/**
 * The inspector page in headless Debian Chromium shows hostile runtime data as text: inspection messages and task
 * events published on a real nats-server carry `<img onerror>` and `<script>` in their task id, process, actor id,
 * machine name, state value, event type and message, and a map's node paths. None becomes an element, no script
 * runs, and the page breaks no rule of its Content-Security-Policy. A forged chart (a `/api/machines` answer with a script, handlers, a link
 * and a foreign object) loses all of them before it reaches the page.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import type { InspectMessage } from "../../protocol/inspect.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

/** Debian's Chromium, as in inspector-browser.test.ts. */
const CHROMIUM = "/usr/bin/chromium";

const EVIL = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>"'&amp;`;

let nats: TestNatsServer;
let nc: NatsConnection;
let browser: Browser;
let inspector: CliProcess;
let pageUrl: string;
const root = randomRoot();

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install -y chromium; .ci/run does it)`);
  nats = await startTestNatsServer();
  nc = await connect({ servers: nats.url, name: "inspector-xss-test" });
  inspector = startCli(["inspect", "--port", "0", "--nats", nats.url, "--prefix", root]);
  [, pageUrl = ""] = await inspector.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});

afterAll(async () => {
  await browser?.close();
  await inspector?.stop();
  await nc?.close();
  await nats?.stop();
});

/** A page that records every Content-Security-Policy violation in `window.__violations`. */
async function newPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.addInitScript({
    content: `window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));`,
  });
  return page;
}

interface Injected {
  xss: unknown;
  violations: string[];
  elements: number;
  scripts: Array<string | null>;
  handlers: string[];
}

/**
 * What must hold on a page after hostile data was shown: no injected element or handler, no script run, and no CSP
 * violation but the `allowed` ones.
 */
async function expectNothingInjected(page: Page, allowed: RegExp = /$^/): Promise<void> {
  const found = (await page.evaluate(`({
    xss: window.__xss,
    violations: window.__violations,
    elements: document.querySelectorAll("img, image, iframe, object, embed, foreignObject, a").length,
    scripts: [...document.querySelectorAll("script")].map((s) => s.getAttribute("src")),
    handlers: [...document.querySelectorAll("*")].flatMap((e) => [...e.attributes].map((a) => a.name)).filter((name) => name.startsWith("on")),
  })`)) as Injected;
  expect({ ...found, violations: found.violations.filter((v) => !allowed.test(v)) }).toEqual({
    xss: undefined,
    violations: [],
    elements: 0,
    scripts: ["/app.js"],
    handlers: [],
  });
}

describe("the inspector page with hostile runtime data", () => {
  it("shows task ids, processes, machines, states, events and messages as text, with a CSP and no script run", async () => {
    const subjects = createSubjects(root);
    const taskId = `task-${EVIL}`;
    const base = { process: `proc-${EVIL}`, role: "director" as const, taskId, rootId: `a1-${EVIL}`, at: Date.now() };
    const messages: InspectMessage[] = [
      {
        type: "inspect.actor",
        ...base,
        actorId: `a1-${EVIL}`,
        machine: "task",
        isMachine: true,
        snapshot: { status: "active", value: { running: `state-${EVIL}` } },
      },
      {
        type: "inspect.actor",
        ...base,
        actorId: `a2-${EVIL}`,
        machine: `m-${EVIL}`,
        isMachine: true,
        snapshot: { status: "active", value: `v-${EVIL}` },
      },
      { type: "inspect.event", ...base, actorId: `a1-${EVIL}`, event: { type: `ev-${EVIL}` } },
    ];
    for (const m of messages) nc.publish(subjects.inspect("director", m.type.slice("inspect.".length)), JSON.stringify(m));
    const plainTask = `xss-${Date.now()}`;
    const event = {
      taskId: plainTask,
      seq: 1,
      type: `type-${EVIL}`,
      state: "running",
      at: new Date().toISOString(),
      message: `msg-${EVIL}`,
    };
    nc.publish(subjects.taskEvents(plainTask), JSON.stringify(event));
    // A map whose node paths are hostile: its branches are drawn with them as text.
    const mapPath = `0-${EVIL}`;
    const mapData = [
      { type: "map.started", data: { nodePath: mapPath, kind: "map", total: 2, maxParallel: 2, onFailure: "fail_fast" } },
      { type: "branch.started", data: { nodePath: `${mapPath}.steps.0`, mapPath, branch: 1, total: 2 } },
    ];
    mapData.forEach((m, i) =>
      nc.publish(subjects.taskEvents(plainTask), JSON.stringify({ ...event, ...m, seq: i + 2, message: `msg-${EVIL}` })),
    );
    await nc.flush();

    const page = await newPage();
    const response = await page.goto(`${pageUrl}?task=${encodeURIComponent(taskId)}`);
    const csp = response?.headers()["content-security-policy"] ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(response?.headers()["x-frame-options"]).toBe("DENY");
    await page.waitForSelector("body[data-ready=true]");

    // The hostile task is listed and selected, its id and timeline shown as written.
    const row = (id: string) => page.locator("#tasks .task").filter({ has: page.locator(".id", { hasText: id }) });
    await row(taskId).waitFor();
    expect(await row(taskId).locator(".id").textContent()).toBe(taskId);
    expect(await page.locator("#detail-task").textContent()).toBe(taskId);
    // The machines' events are behind the timeline's toggle.
    await page.check("#show-xstate");
    await page.locator("#timeline li .type", { hasText: `ev-${EVIL}` }).waitFor();
    expect(await page.locator("#timeline li").first().getAttribute("data-type")).toBe(`ev-${EVIL}`);
    // The process, the actors and their states.
    expect(await page.locator(".process > .name").first().textContent()).toBe(`proc-${EVIL}`);
    expect(await page.locator("#filter-process option").nth(1).textContent()).toBe(`proc-${EVIL}`);
    expect(await page.locator(".actor .value").allTextContents()).toEqual(expect.arrayContaining([`running.state-${EVIL}`, `v-${EVIL}`]));
    // Focusing the actor of the unknown machine shows its name in the title and the hint.
    await page.locator(".actor", { hasText: `m-${EVIL}` }).click();
    expect(await page.locator("#focus-title").textContent()).toContain(`m-${EVIL} · director · task ${taskId}`);
    expect(await page.locator("#focus-chart p.hint").textContent()).toBe(`m-${EVIL} is not a state machine (an invoked promise)`);
    // The task event's type and message.
    await page.fill("#filter-task", "");
    await row(plainTask).click();
    await page.locator("#timeline li .type", { hasText: `type-${EVIL}` }).waitFor();
    expect(await page.locator("#timeline li").first().textContent()).toContain(` — msg-${EVIL}`);
    // The hostile map's node, label and branch.
    const map = page.locator(".map", { has: page.locator('.branch[data-branch="1"][data-state="running"]') });
    await map.waitFor();
    expect(await map.getAttribute("data-map")).toBe(mapPath);
    expect(
      await page
        .locator("#tree li", { has: map })
        .last()
        .evaluate((li) => li.firstChild?.textContent),
    ).toBe(`map ${mapPath}`);
    expect(await map.locator(".branch").first().getAttribute("title")).toBe(`${mapPath}.steps.0`);

    await expectNothingInjected(page);
    await page.close();
  });

  it("inserts a forged chart only as the SVG elements and attributes a chart has", async () => {
    const page = await newPage();
    const forged = [
      `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" class="statechart" data-machine="forged" onload="window.__xss=3" id="tasks">`,
      `<script>window.__xss=4</script>`,
      `<g class="state" data-state="forged.a" onclick="window.__xss=5" style="fill:red"><title>a</title><rect x="1" y="1" width="9" height="9" rx="2"/></g>`,
      `<a href="javascript:window.__xss=6"><text x="1" y="1">link</text></a>`,
      `<image href="x" xlink:href="x" onerror="window.__xss=7"/>`,
      `<foreignObject width="9" height="9"><img xmlns="http://www.w3.org/1999/xhtml" src="x" onerror="window.__xss=8"/></foreignObject>`,
      `<path d="M 0 0" marker-end="url(https://attacker.example/x.svg#a)"/>`,
      `</svg>`,
    ].join("");
    await page.route("**/api/machines", (route) =>
      route.fulfill({
        contentType: "application/json",
        body: JSON.stringify([{ name: "forged", id: "forged", svg: forged, states: ["forged.a"] }]),
      }),
    );
    await page.goto(pageUrl);
    await page.waitForSelector("body[data-ready=true]");
    const chart = page.locator('#machines svg[data-machine="forged"]');
    expect(await chart.count()).toBe(1);
    // Kept: the state group with its data attributes and its rectangle; dropped: everything that could run or load.
    expect(await chart.locator('g.state[data-state="forged.a"] rect').count()).toBe(1);
    expect(await chart.evaluate((svg) => [...svg.querySelectorAll("*")].map((e) => e.localName))).toEqual(["g", "title", "rect", "path"]);
    expect(
      await chart.evaluate((svg) => [svg, ...svg.querySelectorAll("*")].flatMap((e) => [...e.attributes].map((a) => a.name)).sort()),
    ).toEqual(["class", "class", "d", "data-machine", "data-state", "height", "rx", "width", "x", "y"].sort());
    // The page's own #tasks list is still the one its script finds.
    expect(await page.locator("#tasks").evaluate((e) => e.localName)).toBe("ul");
    // Parsing the forged text (in a detached document, before the allowlist drops them) trips the CSP on its inline
    // handlers and style: those reports are the CSP's second line of defence, not something that ran.
    await expectNothingInjected(page, /^(script|style)-src-attr inline$/);
    await page.close();
  });
});
