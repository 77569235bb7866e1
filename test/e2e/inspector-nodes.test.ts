/**
 * Inspector 2 in headless Debian Chromium: a real sequential task (two steps, the first reading a file with the
 * built-in `read_file` tool) runs on `dirigent up` over a real nats-server with the scripted mock model, and the
 * page, reading the task's node records through `dirigent inspect`, draws its node tree with names, states,
 * durations and tokens, and a waterfall with one bar per node; clicking the first step shows its conversation (the
 * prompt as sent, the model's answer, the tool call with its arguments and result), its output and its tokens; the
 * timeline shows lifecycle and node events, the machines' internal events only behind a toggle; the scrubber
 * redraws the tree, the waterfall and the task machine's active state as they were at a moment of the task. Saves a screenshot
 * in test-artifacts/inspector-nodes.png (docs/ has its own, taken by `npm run screenshots`). A map whose three branches
 * the mock model holds until all have asked draws them as bars in their own lanes, overlapping in time.
 */
import { connect } from "@nats-io/transport-node";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import type { NodeListReply } from "../../protocol/node-records.js";
import { launchChromium } from "../support/chromium.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startInspectorCli, startMockLlmCli, type CliProcess } from "../support/processes.js";

const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts", import.meta.url));

let server: TestNatsServer;
let browser: Browser;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-inspect-nodes-"));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("inspector 2: node records in a browser", () => {
  it("draws a task's nodes with a waterfall and shows a clicked node's prompt, answer and tool call", async () => {
    const root = randomRoot();
    const workspace = join(dir, "workspace");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "notes.txt"), "tide pools hold anemones");
    const script = join(dir, "script.json");
    const rules = [
      {
        match: { lastUser: { regex: "^READ" }, turn: 1 },
        toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }],
        usage: { prompt_tokens: 100, completion_tokens: 5 },
      },
      {
        match: { lastUser: { regex: "^READ" }, hasToolResult: true },
        reply: "The notes say: {{lastTool}}",
        usage: { prompt_tokens: 120, completion_tokens: 9 },
      },
      { match: { lastUser: { regex: "^TITLE" } }, reply: "Pools of Anemones", usage: { prompt_tokens: 40, completion_tokens: 4 } },
    ];
    writeFileSync(script, JSON.stringify({ rules }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const modelUrl = mock.url;
    const inspector = await startInspectorCli(server.url, root);
    processes.push(inspector.process);
    const { pageUrl } = inspector;
    const env = {
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: "sk-nodes-test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_INSPECT: "on",
      DIRIGENT_WORKSPACE_ROOT: workspace,
    };
    const up = startCli(["up", "--nats", server.url, "--prefix", root], env);
    processes.push(up);
    await up.waitFor(/ready/);

    const page = await browser.newPage({ viewport: { width: 1600, height: 1100 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const taskId = `nodes-${Date.now()}`;
    const xml = `<task type="sequential"><description>Notes and a title</description><steps>
  <task name="read"><description>READ the notes in notes.txt and say what they hold</description></task>
  <task><description>TITLE for {{previous_result}}</description></task>
</steps></task>`;
    const nc = await connect({ servers: server.url, name: "inspector-nodes-test" });
    let listed: NodeListReply;
    try {
      const subjects = createSubjects(root);
      const done = nc.subscribe(subjects.taskResult(taskId), { max: 1 });
      expect((await nc.request(subjects.submit, JSON.stringify({ taskId, xml }), { timeout: 10_000 })).json()).toEqual({
        taskId,
        status: "accepted",
      });
      for await (const m of done) expect(m.json<{ status: string }>().status).toBe("COMPLETE");
      listed = (await nc.request(subjects.taskNodes(taskId), "{}", { timeout: 10_000 })).json<NodeListReply>();
    } finally {
      await nc.drain();
    }
    expect(listed.nodes.map((n) => n.path).sort()).toEqual(["0", "0.steps.0", "0.steps.1"]);

    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    const rows = page.locator("#nodes .node-row");
    await page.locator('#nodes .node-row[data-path="0.steps.1"][data-state="completed"]').waitFor({ timeout: 60_000 });
    // The tree: the task's node first, its steps under it in order, each with its name, state, duration and tokens.
    const table = await rows.evaluateAll((trs) =>
      trs.map((tr) => ({
        path: tr.getAttribute("data-path"),
        cells: [...tr.querySelectorAll("td")].slice(0, 4).map((td) => td.textContent),
      })),
    );
    expect(table.map((r) => r.path)).toEqual(["0", "0.steps.0", "0.steps.1"]);
    const byPath = new Map(listed.nodes.map((n) => [n.path, n]));
    for (const row of table) {
      const node = byPath.get(row.path ?? "");
      expect(row.cells[0]).toBe(node?.name);
      expect(row.cells[1]).toBe("completed");
      expect(row.cells[2]).toMatch(/\d (ms|s)$/);
    }
    expect(table[1]?.cells[0]).toBe("step 1 · read");
    // The task tree beside names each node as its record does.
    await page.locator('#tree li[data-node="0.steps.0"] > .node-name').waitFor();
    expect(await page.locator('#tree li[data-node="0.steps.0"] > .node-name').textContent()).toBe(" · step 1 · read");
    // The first step's own tokens: its two model calls (105 + 129).
    expect(table[1]?.cells[3]).toBe("234");
    expect(table[2]?.cells[3]).toBe("44");
    // The sequential called no model itself: its cell shows its steps' total.
    expect(table[0]?.cells[3]).toBe("Σ 278");
    // The waterfall: one bar per node, each coloured by its state, the second step's bar starting after the first's.
    const bars = await page.locator("#nodes .bar").evaluateAll((els) =>
      els.map((b) => ({
        state: b.getAttribute("data-state"),
        left: b.getBoundingClientRect().left,
        right: b.getBoundingClientRect().right,
      })),
    );
    expect(bars.length).toBe(listed.nodes.length);
    expect(bars.map((b) => b.state)).toEqual(["completed", "completed", "completed"]);
    expect(bars[2]!.left).toBeGreaterThanOrEqual(bars[1]!.right - 1);
    expect(bars[0]!.left).toBeLessThanOrEqual(bars[1]!.left);

    // Click the first step: its prompt, the tool call with its arguments and result, the answer, the tokens.
    await rows.nth(1).click();
    const detail = page.locator('#node-detail .node-detail[data-path="0.steps.0"]');
    await detail.waitFor();
    expect(await detail.locator("h3").textContent()).toBe("step 1 · read");
    const messages = await detail
      .locator(".message")
      .evaluateAll((els) =>
        els.map((m) => ({ role: m.getAttribute("data-role"), text: [...m.querySelectorAll("pre")].map((p) => p.textContent).join("\n") })),
      );
    const user = messages.find((m) => m.role === "user");
    expect(user?.text).toContain("READ the notes in notes.txt and say what they hold");
    const withCall = detail.locator('.message[data-role="assistant"] .tool-call[data-tool="read_file"]');
    expect(await withCall.locator("pre.args").textContent()).toBe(JSON.stringify({ path: "notes.txt" }, null, 2));
    expect(await withCall.locator(".head").textContent()).toMatch(/^tool call read_file · builtin · \d+ ms$/);
    expect(messages.find((m) => m.role === "tool")?.text).toContain("tide pools hold anemones");
    expect(messages.at(-1)).toEqual({ role: "assistant", text: "The notes say: tide pools hold anemones" });
    expect(await detail.locator(".message .head", { hasText: "turn 2" }).textContent()).toContain("129 tokens (120 in, 9 out)");
    expect(await detail.locator("pre.output").textContent()).toBe("The notes say: tide pools hold anemones");

    // The timeline: lifecycle and node events; the machines' events hidden until the toggle shows them.
    const timeline = page.locator("#timeline");
    await timeline.locator('li[data-type="node.finished"]').first().waitFor();
    await timeline.locator('li[data-type="task.completed"]').waitFor();
    const machineEvents = timeline.locator("li.kind-xstate");
    expect(await machineEvents.count()).toBeGreaterThan(0);
    expect(await machineEvents.first().isVisible()).toBe(false);
    await page.check("#show-xstate");
    expect(await machineEvents.first().isVisible()).toBe(true);
    await page.uncheck("#show-xstate");

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "inspector-nodes.png"), fullPage: false });

    // Time travel: in the middle of step 1, the tree and waterfall show the task and step 1 running and step 2 not
    // started, the task machine is in `running`, and the later timeline entries are marked as after that moment.
    const step1 = byPath.get("0.steps.0")!;
    const scrub = (at: number) =>
      page.evaluate(
        `(() => { const input = document.getElementById("scrub"); input.value = "${at}"; input.dispatchEvent(new Event("input")); })()`,
      );
    const middle = Date.parse(step1.startedAt) + Math.floor(step1.durationMs / 2);
    await scrub(middle);
    await page.waitForSelector(`#scrubber[data-at="${middle}"]`);
    const states = () =>
      page.locator("#nodes .node-row").evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-path"), tr.getAttribute("data-state")]));
    expect(await states()).toEqual([
      ["0", "running"],
      ["0.steps.0", "running"],
    ]);
    expect(await page.locator("#nodes .bar").count()).toBe(2);
    await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.running"]');
    expect(await page.locator('#focus-chart g.state.active[data-state="task.completed"]').count()).toBe(0);
    expect(await timeline.locator('li[data-type="task.completed"]').getAttribute("class")).toContain("after-scrub");
    // Every machine's chart is redrawn as it was too: when step 1's tool call had just ended, its Handler session was
    // in a state short of its end; at the first event no session existed; now every session has ended.
    const sessionStates = () =>
      page
        .locator('#machines svg[data-machine="handlerSession"] g.state.in-task')
        .evaluateAll((gs) => gs.map((g) => g.getAttribute("data-state")));
    const liveSessions = await (async () => {
      await page.click("#scrub-live");
      await page.waitForSelector('#scrubber[data-at=""]');
      return sessionStates();
    })();
    expect(liveSessions.length).toBeGreaterThan(0);
    const toolCallAt = Number(await timeline.locator('li[data-type="tool.call"]').first().getAttribute("data-at"));
    await scrub(toolCallAt);
    await page.waitForSelector(`#scrubber[data-at="${toolCallAt}"]`);
    const duringTool = await sessionStates();
    expect(duringTool.length).toBeGreaterThan(0);
    expect(duringTool).not.toEqual(liveSessions);
    // At the first event the task was queued; back at now it is completed, with all its nodes.
    await scrub(Number(await page.locator("#scrub").getAttribute("min")));
    await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.queued"]');
    expect(await sessionStates()).toEqual([]);
    await page.click("#scrub-live");
    await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.completed"]');
    expect(await states()).toEqual([
      ["0", "completed"],
      ["0.steps.0", "completed"],
      ["0.steps.1", "completed"],
    ]);
    expect(await timeline.locator("li.after-scrub").count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("draws a map's branches, which ran at the same time, as bars overlapping in time, each in its own lane", async () => {
    const root = randomRoot();
    const script = join(dir, "map-script.json");
    // No branch is answered before all three have asked: they are in flight together.
    const rules = [{ match: { lastUser: { regex: "^BRANCH" } }, gate: { name: "together", count: 3 }, reply: "done {{lastUser}}" }];
    writeFileSync(script, JSON.stringify({ rules }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const modelUrl = mock.url;
    const inspector = await startInspectorCli(server.url, root);
    processes.push(inspector.process);
    const { pageUrl } = inspector;
    const up = startCli(["up", "--nats", server.url, "--prefix", root], { OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: "sk-nodes-map" });
    processes.push(up);
    await up.waitFor(/ready/);

    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    const taskId = `nodes-map-${Date.now()}`;
    const xml = `<task type="map"><steps>
  <task><description>BRANCH one</description></task>
  <task><description>BRANCH two</description></task>
  <task><description>BRANCH three</description></task>
</steps></task>`;
    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    const nc = await connect({ servers: server.url, name: "inspector-nodes-map-test" });
    try {
      const subjects = createSubjects(root);
      expect((await nc.request(subjects.submit, JSON.stringify({ taskId, xml }), { timeout: 10_000 })).json()).toEqual({
        taskId,
        status: "accepted",
      });
      // Read again at each node.finished event, the list ends with all four nodes recorded.
      await page.locator('#nodes .node-row[data-path="0"][data-state="completed"]').waitFor({ timeout: 60_000 });
    } finally {
      await nc.drain();
    }
    const rows = await page.locator("#nodes .node-row").evaluateAll((trs) =>
      trs.map((tr) => {
        const bar = tr.querySelector(".bar")?.getBoundingClientRect();
        return {
          path: tr.getAttribute("data-path"),
          lane: tr.getAttribute("data-lane"),
          left: bar?.left ?? NaN,
          right: bar?.right ?? NaN,
          top: bar?.top ?? NaN,
        };
      }),
    );
    expect(rows.map((r) => r.path)).toEqual(["0", "0.steps.0", "0.steps.1", "0.steps.2"]);
    expect(new Set(rows.map((r) => r.lane)).size).toBe(4);
    const branches = rows.slice(1);
    // Each branch in its own lane (one below the other), all overlapping in time: none ended before another started.
    expect(branches.map((b) => b.top)).toEqual([...branches.map((b) => b.top)].sort((a, b) => a - b));
    for (const a of branches) for (const b of branches) expect(a.left).toBeLessThan(b.right);
    await page.close();
  });

  it("streams a running node's answer into its detail, then shows its record once it ends", async () => {
    const root = randomRoot();
    const script = join(dir, "stream-script.json");
    // Two pieces go out, then the answer is held mid-stream until the test has seen them in the page.
    const rules = [
      { match: { lastUser: { regex: "^POEM" } }, chunks: ["Salt ", "wind ", "over ", "stone"], streamGate: { name: "midway", after: 2 } },
    ];
    writeFileSync(script, JSON.stringify({ rules }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const modelUrl = mock.url;
    const inspector = await startInspectorCli(server.url, root);
    processes.push(inspector.process);
    const { pageUrl } = inspector;
    const up = startCli(["up", "--nats", server.url, "--prefix", root], { OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: "sk-nodes-stream" });
    processes.push(up);
    await up.waitFor(/dirigent: ready/);

    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const taskId = `nodes-stream-${Date.now()}`;
    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    const nc = await connect({ servers: server.url, name: "inspector-nodes-stream-test" });
    try {
      const subjects = createSubjects(root);
      const done = nc.subscribe(subjects.taskResult(taskId), { max: 1 });
      const xml = "<task><description>POEM about the shore</description></task>";
      expect((await nc.request(subjects.submit, JSON.stringify({ taskId, xml, stream: true }), { timeout: 10_000 })).json()).toEqual({
        taskId,
        status: "accepted",
      });
      // The node is listed running before it has a record; clicked, it shows what has streamed so far.
      const row = page.locator('#nodes .node-row[data-path="0"][data-state="running"]');
      await row.waitFor({ timeout: 60_000 });
      await row.click();
      const streaming = page.locator('#node-detail .node-detail[data-path="0"][data-state="running"] pre.streaming');
      await streaming.filter({ hasText: /^Salt wind\s*$/ }).waitFor({ timeout: 60_000 });
      expect(await streaming.textContent()).toBe("Salt wind ");
      // One timeline line for the run of pieces.
      expect(await page.locator('#timeline li[data-type="model.delta"]').count()).toBe(1);
      const [, port = ""] = /:(\d+)\//.exec(modelUrl) ?? [];
      expect((await fetch(`http://127.0.0.1:${port}/gates/midway/open`, { method: "POST" })).status).toBe(200);
      for await (const m of done) expect(m.json<{ status: string }>().status).toBe("COMPLETE");
    } finally {
      await nc.drain();
    }
    // Once the node ends, its record replaces the streamed text: the whole answer, as output.
    const recorded = page.locator('#node-detail .node-detail[data-path="0"]:not([data-state="running"])');
    await recorded.waitFor({ timeout: 60_000 });
    expect(await recorded.locator("pre.output").textContent()).toBe("Salt wind over stone");
    expect(errors).toEqual([]);
    await page.close();
  });
});
