/**
 * The inspector page in headless Debian Chromium (playwright-core, no browser download): four role processes with
 * DIRIGENT_INSPECT=on, `dirigent inspect` as a fifth, a task submitted by a plain NATS client. The page must load
 * with no request beyond 127.0.0.1, draw the task machine, show the task's actors from several processes, and
 * highlight the task machine's state as it moves from running to completed (and, in the gallery, the states of all
 * the task's actors); then a task with a subtask appears in the task tree, and the role and process filters hide the
 * other actors; the page breaks no rule of its Content-Security-Policy. Saves a screenshot in test-artifacts/.
 * A real map task (a map of steps, one of them a map over a list) shows its branches side by side under their map
 * node, each with its state, while some are done, one failed and others wait at the mock model's gate.
 */
import { connect } from "@nats-io/transport-node";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { machines } from "../../runtime/charts/registry.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startInspectorCli, startMockLlmCli, type CliProcess } from "../support/processes.js";

/** Debian's Chromium; `.ci/run` installs it (`apt-get install chromium`). */
export const CHROMIUM = "/usr/bin/chromium";
/** A page script recording every Content-Security-Policy violation in `window.__violations`. */
export const RECORD_CSP_VIOLATIONS = `window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));`;
const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts", import.meta.url));

let server: TestNatsServer;
let browser: Browser;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install -y chromium; .ci/run does it)`);
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-inspect-"));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});

afterAll(async () => {
  await browser?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("dirigent inspect in a browser", () => {
  it("shows a task of a multi-process cluster moving through the task machine, with no request beyond localhost", async () => {
    const root = randomRoot();
    const script = join(dir, "script.json");
    // The answer is held until the page has shown the task running (the test opens the gate).
    const rules = [
      { match: { lastUser: "slowly" }, reply: "Paris", gate: { name: "slowly", count: 1000 } },
      // A session that asks for a subtask (CONTINUATION), then answers with its result.
      {
        match: { lastUser: { regex: "^PARENT" }, turn: 1 },
        toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD name a city" } }],
      },
      { match: { lastUser: { regex: "^CHILD" } }, reply: "Oslo" },
      { match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "Oslo" } }, reply: "Visit Oslo" },
    ];
    writeFileSync(script, JSON.stringify({ rules }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const modelUrl = mock.url;
    const env = {
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: "sk-browser-test-secret",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_INSPECT: "on",
    };
    const inspector = await startInspectorCli(server.url, root);
    processes.push(inspector.process);
    const { pageUrl } = inspector;
    for (const role of ["memory", "handler", "evaluator", "director"]) {
      const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(worker);
      await worker.waitFor(/ready/);
    }

    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    // The page lives within its Content-Security-Policy: every violation is recorded and none may occur.
    await page.addInitScript({ content: RECORD_CSP_VIOLATIONS });
    const taskId = `browser-${Date.now()}`;
    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    // Every machine is drawn; the task machine with all its states, CONTINUATION states included.
    expect(await page.locator("#machines figure").count()).toBe(machines.length);
    const taskChart = page.locator('#machines svg[data-machine="task"]');
    for (const state of ["task.queued", "task.running.awaitingSubtask", "task.running.awaitingEvaluation", "task.completed"]) {
      expect(await taskChart.locator(`g.state[data-state="${state}"]`).count()).toBe(1);
    }

    const nc = await connect({ servers: server.url, name: "browser-test-client" });
    try {
      const body = JSON.stringify({
        taskId,
        xml: "<task><description>Answer slowly: what is the capital of {{country}}?</description></task>",
        inputs: { country: "France" },
      });
      expect((await nc.request(`${root}.tasks.submit`, body, { timeout: 10_000 })).json()).toEqual({ taskId, status: "accepted" });

      // The task's own machine is focused and its running state highlighted while the model answers.
      await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.running"]', { timeout: 60_000 });
      expect(await page.locator('#focus-chart g.state.active[data-state="task.running.executing"]').count()).toBe(1);
      // Its actors come from several processes: the Director's task machine, the Evaluator's walk, the Handler's session.
      await page.waitForSelector(`.process .group[data-task="${taskId}"] .actor[data-machine="handlerSession"]`, { timeout: 60_000 });
      const processesOfTask = await page
        .locator(".process")
        .filter({ has: page.locator(`.group[data-task="${taskId}"]`) })
        .count();
      expect(processesOfTask).toBeGreaterThanOrEqual(3);
      expect((await fetch(`${String(modelUrl).replace(/\/v1$/, "")}/gates/slowly/open`, { method: "POST" })).ok).toBe(true);

      await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.completed"]', { timeout: 60_000 });
      expect(await page.locator('#focus-chart g.state.active[data-state="task.running"]').count()).toBe(0);
      await page.waitForSelector('#timeline li[data-type="task.completed"]');
      await page.waitForSelector(`#tasks .task[data-task-id="${taskId}"][data-state="completed"]`);
      // The gallery highlights the states of every actor of the selected task, each on its own machine's chart.
      await page.waitForSelector('#machines svg[data-machine="task"] g.state.in-task[data-state="task.completed"]');
      for (const machine of ["evaluation", "handlerSession"])
        await page.waitForSelector(`#machines svg[data-machine="${machine}"] g.state.in-task`);
      expect(await page.locator('#machines svg[data-machine="checkmate"] g.state.in-task').count()).toBe(0);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, "inspector.png"), fullPage: false });

      // A task with a subtask: its tree shows the subtask's node under the task's.
      const parentId = `browser-parent-${Date.now()}`;
      const parentBody = JSON.stringify({ taskId: parentId, xml: "<task><description>PARENT plan a trip</description></task>" });
      expect((await nc.request(`${root}.tasks.submit`, parentBody, { timeout: 10_000 })).json()).toEqual({
        taskId: parentId,
        status: "accepted",
      });
      await page.fill("#filter-task", "");
      await page.click(`#tasks .task[data-task-id="${parentId}"][data-state="completed"]`, { timeout: 60_000 });
      await page.waitForSelector('#tree li[data-node="0"] li[data-node="0/subtask1:0"]');
      expect(await page.locator("#detail-task").textContent()).toBe(parentId);

      // The role filter leaves only that role's actors (and tasks it took part in) visible.
      const shown = () => page.locator(".actor:not(.hidden)");
      await page.selectOption("#filter-role", "handler");
      expect(await shown().count()).toBeGreaterThan(0);
      expect(new Set(await shown().evaluateAll((rows) => rows.map((r) => r.getAttribute("data-role"))))).toEqual(new Set(["handler"]));
      expect(await page.locator(`.actor.hidden[data-role="director"]`).count()).toBeGreaterThan(0);
      // The process filter leaves only one process's actors visible.
      await page.selectOption("#filter-role", "");
      const handlerProcess = await page
        .locator('.actor[data-machine="handlerSession"]')
        .first()
        .evaluate((r) => r.closest(".process")?.getAttribute("data-process") ?? "");
      expect(await page.locator("#filter-process option").count()).toBeGreaterThanOrEqual(4);
      await page.selectOption("#filter-process", handlerProcess);
      const processes = await shown().evaluateAll((rows) => rows.map((r) => r.closest(".process")?.getAttribute("data-process")));
      expect(processes.length).toBeGreaterThan(0);
      expect(new Set(processes)).toEqual(new Set([handlerProcess]));
      expect(await page.locator(`.process:not([data-process="${handlerProcess}"]) .actor:not(.hidden)`).count()).toBe(0);
      await page.selectOption("#filter-process", "");
      expect(await page.locator(`.process:not([data-process="${handlerProcess}"]) .actor:not(.hidden)`).count()).toBeGreaterThan(0);
    } finally {
      await nc.drain();
    }

    expect(await page.evaluate("window.__violations")).toEqual([]);
    const origin = new URL(pageUrl).origin;
    expect(requests.length).toBeGreaterThan(3);
    expect(requests.filter((u) => !u.startsWith(origin))).toEqual([]);
    expect(requests.every((u) => new URL(u).hostname === "127.0.0.1")).toBe(true);
    await page.close();
  });

  it("draws a real map's branches side by side under their map node, in order, with their states", async () => {
    const root = randomRoot();
    const script = join(dir, "map-script.json");
    // Branches held at the gate `map` until the test opens it, one refused with HTTP 400, the others answered.
    const rules = [
      { match: { lastUser: { regex: "HOLD|FILE b\\.md" } }, gate: { name: "map", count: 3 }, reply: "late {{lastUser}}" },
      { match: { lastUser: "BREAK" }, status: 400, reply: "bad request" },
    ];
    writeFileSync(script, JSON.stringify({ rules, default: { reply: "done: {{lastUser}}" } }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const modelUrl = mock.url;
    const inspector = await startInspectorCli(server.url, root);
    processes.push(inspector.process);
    const { pageUrl } = inspector;
    const env = { OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: "sk-map-test", DIRIGENT_MODEL_MAX_RETRIES: "0" };
    const up = startCli(["up", "--nats", server.url, "--prefix", root], env);
    processes.push(up);
    await up.waitFor(/ready/);

    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    // No script error; the only failed requests are the replay of the task asked for before it was submitted.
    const errors: string[] = [];
    const failed: string[] = [];
    page.on("console", (m) => void (m.type() === "error" && !m.text().startsWith("Failed to load resource") && errors.push(m.text())));
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("response", (r) => void (r.status() >= 400 && failed.push(`${r.status()} ${new URL(r.url()).pathname}`)));
    await page.addInitScript({ content: RECORD_CSP_VIOLATIONS });
    const taskId = `browser-map-${Date.now()}`;
    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    // A map of four steps, failures collected: the second step is a map over a list of two files.
    const xml = `<task type="map" on_failure="collect"><steps>
  <task><description>QUICK one</description></task>
  <task type="map" over="files">
    <inputs><input name="files">["a.md","b.md"]</input></inputs>
    <steps><task><description>FILE {{item}}</description></task></steps>
  </task>
  <task><description>BREAK three</description></task>
  <task><description>HOLD four</description></task>
</steps></task>`;
    const nc = await connect({ servers: server.url, name: "browser-map-test-client" });
    try {
      const body = JSON.stringify({ taskId, xml });
      expect((await nc.request(createSubjects(root).submit, body, { timeout: 10_000 })).json()).toEqual({ taskId, status: "accepted" });

      const outer = page.locator('#tree li[data-node="0"] > .map[data-map="0"]');
      // The branch that is itself a map: its branches are drawn in its node, under the outer map's node.
      const nested = page.locator('#tree li[data-node="0"] li[data-node="0.steps.1"] > .map[data-map="0.steps.1"]');
      await outer.locator('.branch[data-branch="1"][data-state="COMPLETE"]').waitFor({ timeout: 60_000 });
      await outer.locator('.branch[data-branch="3"][data-state="FAILED"]').waitFor({ timeout: 60_000 });
      await nested.locator('.branch[data-branch="1"][data-state="COMPLETE"]').waitFor({ timeout: 60_000 });
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.locator("#detail").screenshot({ path: join(ARTIFACTS, "inspector-map.png") });
      const chips = (map: typeof outer) =>
        map.locator(":scope > .branches > .branch").evaluateAll((nodes) =>
          nodes.map((n) => {
            const box = n.getBoundingClientRect();
            return { label: n.querySelector(".label")?.textContent, state: n.querySelector(".state")?.textContent, x: box.x, y: box.y };
          }),
        );
      const branches = await chips(outer);
      expect(branches.map((b) => [b.label, b.state])).toEqual([
        ["branch 1/4", "COMPLETE"],
        ["branch 2/4", "running"],
        ["branch 3/4", "FAILED"],
        ["branch 4/4", "running"],
      ]);
      // Side by side: one row, left to right in order of branch number.
      expect(new Set(branches.map((b) => Math.round(b.y))).size).toBe(1);
      expect(branches.map((b) => b.x)).toEqual([...branches.map((b) => b.x)].sort((a, b) => a - b));
      expect(await outer.locator(".summary").textContent()).toBe("2/4 done · 2 running · 1 failed · 4 at once");
      expect(await page.locator('#tree li[data-node="0"]').evaluate((li) => li.firstChild?.textContent)).toBe("map 0");
      expect(await page.locator('#tree li[data-node="0.steps.1"]').evaluate((li) => li.firstChild?.textContent)).toBe("map 0.steps.1");
      expect((await chips(nested)).map((b) => [b.label, b.state])).toEqual([
        ["branch 1/2", "COMPLETE"],
        ["branch 2/2", "running"],
      ]);
      expect(await nested.locator(".summary").textContent()).toBe("1/2 done · 1 running · 2 at once");
      // Each branch of the nested map (a map over a list, at 0-based `map:<i>`) is a node under the nested map's.
      for (const i of [0, 1]) await page.locator(`#tree li[data-node="0.steps.1"] li[data-node="0.steps.1/map:${i}"]`).waitFor();

      // The third request at the gate opens it: the held branches answer, and the map fails naming branch 3.
      const opened = await fetch(`${modelUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "mock-model", messages: [{ role: "user", content: "HOLD opener" }] }),
      });
      expect(opened.status).toBe(200);
      await page.waitForSelector(`#tasks .task[data-task-id="${taskId}"][data-state="failed"]`, { timeout: 60_000 });
      await nested.locator('.branch[data-branch="2"][data-state="COMPLETE"]').waitFor({ timeout: 60_000 });
      expect((await chips(outer)).map((b) => b.state)).toEqual(["COMPLETE", "COMPLETE", "FAILED", "COMPLETE"]);
      expect(await outer.locator(".summary").textContent()).toBe("4/4 done · 0 running · 1 failed · 4 at once");
      expect((await chips(nested)).map((b) => b.state)).toEqual(["COMPLETE", "COMPLETE"]);
    } finally {
      await nc.drain();
    }
    expect(await page.evaluate("window.__violations")).toEqual([]);
    expect(errors).toEqual([]);
    expect(failed.filter((f) => f !== `404 /api/tasks/${taskId}`)).toEqual([]);
    expect(requests.every((u) => new URL(u).hostname === "127.0.0.1")).toBe(true);
    await page.close();
  });
});
