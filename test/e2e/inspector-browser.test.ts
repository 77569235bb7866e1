/**
 * The inspector page in headless Debian Chromium (playwright-core, no browser download): four role processes with
 * DIRIGENT_INSPECT=on, `dirigent inspect` as a fifth, a task submitted by a plain NATS client. The page must load
 * with no request beyond 127.0.0.1, draw the task machine, show the task's actors from several processes, and
 * highlight the task machine's state as it moves from running to completed. Saves a screenshot in test-artifacts/.
 */
import { connect } from "@nats-io/transport-node";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

/** Debian's Chromium; `.ci/run` installs it (`apt-get install chromium`). */
export const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts/", import.meta.url));

let server: TestNatsServer;
let browser: Browser;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install -y chromium; .ci/run does it)`);
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-inspect-"));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
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
    // The answer takes a moment, so the page can show the task running before it completes.
    writeFileSync(script, JSON.stringify({ rules: [{ match: { lastUser: "slowly" }, reply: "Paris", delayMs: 1200 }] }));
    const mock = startCli(["mock-llm", "--port", "0", "--script", script, "--quiet"]);
    processes.push(mock);
    const [modelUrl] = await mock.waitFor(/http:\/\/127\.0\.0\.1:\d+\/v1/);
    const env = { OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: "sk-browser-test-secret", DIRIGENT_MODEL_MAX_RETRIES: "0", DIRIGENT_INSPECT: "on" };
    const inspector = startCli(["inspect", "--port", "0", "--nats", server.url, "--prefix", root]);
    processes.push(inspector);
    const [, pageUrl] = (await inspector.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/)) as unknown as [string, string];
    for (const role of ["memory", "handler", "evaluator", "director"]) {
      const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(worker);
      await worker.waitFor(/ready/);
    }

    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    const taskId = `browser-${Date.now()}`;
    await page.goto(`${pageUrl}?task=${taskId}`);
    await page.waitForSelector("body[data-ready=true]");
    // Every machine is drawn; the task machine with all its states, CONTINUATION states included.
    expect(await page.locator("#machines figure").count()).toBeGreaterThanOrEqual(8);
    const taskChart = page.locator('#machines svg[data-machine="task"]');
    for (const state of ["task.queued", "task.running.awaitingSubtask", "task.running.awaitingEvaluation", "task.completed"]) {
      expect(await taskChart.locator(`g.state[data-state="${state}"]`).count()).toBe(1);
    }

    const nc = await connect({ servers: server.url, name: "browser-test-client" });
    try {
      const body = JSON.stringify({ taskId, xml: "<task><description>Answer slowly: what is the capital of {{country}}?</description></task>", inputs: { country: "France" } });
      expect((await nc.request(`${root}.tasks.submit`, body, { timeout: 10_000 })).json()).toEqual({ taskId, status: "accepted" });

      // The task's own machine is focused and its running state highlighted while the model answers.
      await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.running"]', { timeout: 15_000 });
      expect(await page.locator('#focus-chart g.state.active[data-state="task.running.executing"]').count()).toBe(1);
      // Its actors come from several processes: the Director's task machine, the Evaluator's walk, the Handler's session.
      await page.waitForSelector(`.process .group[data-task="${taskId}"] .actor[data-machine="handlerSession"]`, { timeout: 15_000 });
      const processesOfTask = await page.locator(".process").filter({ has: page.locator(`.group[data-task="${taskId}"]`) }).count();
      expect(processesOfTask).toBeGreaterThanOrEqual(3);

      await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.completed"]', { timeout: 15_000 });
      expect(await page.locator('#focus-chart g.state.active[data-state="task.running"]').count()).toBe(0);
      await page.waitForSelector('#timeline li[data-type="task.completed"]');
      await page.waitForSelector(`#tasks .task[data-task-id="${taskId}"][data-state="completed"]`);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, "inspector.png"), fullPage: false });
    } finally {
      await nc.drain();
    }

    const origin = new URL(pageUrl).origin;
    expect(requests.length).toBeGreaterThan(3);
    expect(requests.filter((u) => !u.startsWith(origin))).toEqual([]);
    expect(requests.every((u) => new URL(u).hostname === "127.0.0.1")).toBe(true);
    await page.close();
  });
});
