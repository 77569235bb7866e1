/**
 * The inspector page in headless Debian Chromium shows hostile runtime data as text: inspection messages and task
 * events published on a real nats-server carry `<img onerror>` and `<script>` in their process, actor id, machine
 * name, state value, event type and message, and a map's node paths; a task id cannot carry them (an actor under an
 * illegal one belongs to no task). None becomes an element, no script runs, and the page breaks no rule of its
 * Content-Security-Policy. A forged chart (a `/api/machines` answer with a script, handlers, a link
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
  it("shows processes, machines, states, events and messages as text, with a CSP and no script run", async () => {
    const subjects = createSubjects(root);
    const taskId = `task-${Date.now()}`;
    const illegalTaskId = `task-${EVIL}`;
    const base = { process: `proc-${EVIL}`, role: "director" as const, taskId, rootId: `a1-${EVIL}`, at: Date.now() };
    const messages: InspectMessage[] = [
      // Sent first: once the legal task is listed, this one has been read, and it lists no task.
      {
        type: "inspect.actor",
        ...base,
        taskId: illegalTaskId,
        actorId: `a0-${EVIL}`,
        machine: "task",
        isMachine: true,
        snapshot: { status: "active", value: "running" },
      },
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

    // The task is listed and selected, its timeline shown as written; the illegal task id is no task.
    const row = (id: string) => page.locator("#tasks .task").filter({ has: page.locator(".id", { hasText: id }) });
    await row(taskId).waitFor();
    expect(await row(taskId).locator(".id").textContent()).toBe(taskId);
    expect(await page.locator("#detail-task").textContent()).toBe(taskId);
    expect(await page.locator("#tasks .task .id").allTextContents()).not.toContain(illegalTaskId);
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

  it("shows node records and conversations as text: names, prompts, answers, tool arguments and results", async () => {
    const subjects = createSubjects(root);
    const taskId = `xss-nodes-${Date.now()}`;
    const at = new Date().toISOString();
    const node = {
      path: `0-${EVIL}`,
      occurrence: 1,
      name: `step 1 · ${EVIL}`,
      kind: `atomic-${EVIL}`,
      state: "failed",
      startedAt: at,
      endedAt: at,
      durationMs: 12,
      usage: { promptTokens: 3, completionTokens: 4 },
      error: `err-${EVIL}`,
    };
    const call = { id: `call-${EVIL}`, type: "function", function: { name: `tool-${EVIL}`, arguments: JSON.stringify({ html: EVIL }) } };
    const detail = {
      taskId,
      node: {
        v: 1,
        taskId,
        ...node,
        inputs: { [`in-${EVIL}`]: EVIL },
        output: { status: "FAILED", content: `out-${EVIL}`, notes: { [`note-${EVIL}`]: EVIL } },
        error: { type: "TASK_FAILURE", reason: "model_error", message: `err-${EVIL}` },
        models: [`model-${EVIL}`],
      },
      conversations: [
        {
          messages: [
            { role: "system", content: `sys-${EVIL}` },
            { role: "user", content: `user-${EVIL}` },
            { role: "assistant", content: null, tool_calls: [call] },
            { role: "tool", tool_call_id: call.id, content: `result-${EVIL}` },
            { role: "assistant", content: `answer-${EVIL}` },
          ],
          turns: [
            {
              turn: 1,
              model: `model-${EVIL}`,
              sent: 2,
              usage: { promptTokens: 1, completionTokens: 1 },
              durationMs: 1,
              finishReason: `fr-${EVIL}`,
              retries: 0,
            },
          ],
          toolCalls: [
            {
              turn: 1,
              id: call.id,
              tool: `tool-${EVIL}`,
              source: `src-${EVIL}`,
              arguments: call.function.arguments,
              result: `result-${EVIL}`,
              durationMs: 2,
              malformed: false,
            },
          ],
        },
      ],
      retries: 0,
    };
    // A Director of this test's own, answering the node subjects with hostile records.
    const answer = (subject: string, reply: unknown) => {
      const sub = nc.subscribe(subject);
      void (async () => {
        for await (const m of sub) m.respond(JSON.stringify(reply));
      })();
      return sub;
    };
    const subs = [answer(subjects.taskNodes(taskId), { taskId, nodes: [node] }), answer(subjects.taskNode(taskId), detail)];
    const event = { taskId, seq: 1, type: "task.running", state: "running", at, message: "running" };
    nc.publish(subjects.taskEvents(taskId), JSON.stringify(event));
    await nc.flush();
    try {
      const page = await newPage();
      await page.goto(`${pageUrl}?task=${taskId}`);
      await page.waitForSelector("body[data-ready=true]");
      const row = page.locator("#nodes .node-row");
      await row.waitFor();
      expect(await row.getAttribute("data-path")).toBe(node.path);
      expect(await row.locator("td.name").textContent()).toBe(node.name);
      await row.click();
      const shown = page.locator("#node-detail .node-detail");
      await shown.waitFor();
      expect(await shown.locator("h3").textContent()).toBe(node.name);
      const texts = await shown.locator(".message pre").allTextContents();
      expect(texts).toEqual([`sys-${EVIL}`, `user-${EVIL}`, JSON.stringify({ html: EVIL }, null, 2), `result-${EVIL}`, `answer-${EVIL}`]);
      expect(await shown.locator(".tool-call .head").textContent()).toBe(`tool call tool-${EVIL} · src-${EVIL} · 2 ms`);
      expect(await shown.locator("pre.output").textContent()).toBe(`out-${EVIL}`);
      expect(await shown.locator(".error").textContent()).toBe(`TASK_FAILURE (model_error): err-${EVIL}`);
      await expectNothingInjected(page);
      await page.close();
    } finally {
      for (const sub of subs) sub.unsubscribe();
    }
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
