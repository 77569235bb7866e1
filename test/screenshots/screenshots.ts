/**
 * `npm run screenshots` retakes the inspector's screenshots in docs/ from a real task, so they show the page as it
 * is: four role processes over a real nats-server, the scripted mock model, and a three-step sequential task (a
 * built-in tool call in step 1, a map of two branches in step 2, a title in step 3), opened in headless Debian
 * Chromium. Writes:
 * - docs/inspector.png: the live actors, the task tree, the task machine and the timeline of the completed task;
 * - docs/inspector-nodes.png: the node tree with its waterfall, and step 1's conversation with its tool call;
 * - docs/inspector-fork.png: the task re-run from step 3 with "Re-run from here": steps 1 and 2 replayed.
 * Each shot waits for what it shows (a completed node, a drawn state), never for a time.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { launchChromium } from "../support/chromium.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startInspectorCli, startMockLlmCli, type CliProcess } from "../support/processes.js";

const DOCS = fileURLToPath(new URL("../../docs", import.meta.url));

let server: TestNatsServer;
let browser: Browser;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-screenshots-"));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const TEMPLATE = `<task type="sequential"><description>Field notes to a titled summary</description><steps>
  <task name="read"><description>READ the notes in notes.txt and say what they hold</description></task>
  <task type="map"><description>Describe each animal</description><steps>
    <task><description>ANIMAL describe the anemone in one line</description></task>
    <task><description>ANIMAL describe the hermit crab in one line</description></task>
  </steps></task>
  <task name="title"><description>TITLE for {{previous_result}}</description></task>
</steps></task>`;

const RULES = [
  {
    match: { lastUser: { regex: "^READ" }, turn: 1 },
    toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }],
    usage: { prompt_tokens: 412, completion_tokens: 18 },
  },
  {
    match: { lastUser: { regex: "^READ" }, hasToolResult: true },
    reply: "The notes describe a tide pool: {{lastTool}}",
    usage: { prompt_tokens: 468, completion_tokens: 31 },
  },
  {
    match: { lastUser: { regex: "anemone" } },
    reply: "Anemones wave stinging tentacles.",
    usage: { prompt_tokens: 96, completion_tokens: 9 },
  },
  { match: { lastUser: { regex: "hermit" } }, reply: "Hermit crabs borrow shells.", usage: { prompt_tokens: 97, completion_tokens: 7 } },
  { match: { lastUser: { regex: "^TITLE" } }, reply: "Life in a Tide Pool", usage: { prompt_tokens: 140, completion_tokens: 6 } },
];

it("retakes docs/inspector.png, docs/inspector-nodes.png and docs/inspector-fork.png from a real task", async () => {
  const root = randomRoot();
  const workspace = join(dir, "workspace");
  mkdirSync(workspace);
  writeFileSync(join(workspace, "notes.txt"), "anemones, hermit crabs and a sea star under the ledge");
  const script = join(dir, "script.json");
  writeFileSync(script, JSON.stringify({ rules: RULES }));
  const mock = await startMockLlmCli(script);
  const inspector = await startInspectorCli(server.url, root);
  processes.push(mock.process, inspector.process);
  const [modelUrl, pageUrl] = [mock.url, inspector.pageUrl];
  const env = {
    OPENAI_BASE_URL: modelUrl,
    OPENAI_API_KEY: "sk-screenshots",
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_INSPECT: "on",
    DIRIGENT_WORKSPACE_ROOT: workspace,
    // Per-1M-token prices, so the node table has a cost column to show.
    DIRIGENT_MODEL_PRICES: JSON.stringify({ "gpt-4o-mini": { input: 0.15, output: 0.6 } }),
  };
  for (const role of ["memory", "handler", "evaluator", "director"]) {
    const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
    processes.push(worker);
    await worker.waitFor(/dirigent: ready/);
  }

  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const taskId = "tide-pool-notes";
  await page.goto(`${pageUrl}?task=${taskId}`);
  await page.waitForSelector("body[data-ready=true]");
  const nc = await connect({ servers: server.url, name: "screenshots" });
  try {
    const subjects = createSubjects(root);
    const done = nc.subscribe(subjects.taskResult(taskId), { max: 1 });
    const reply = (await nc.request(subjects.submit, JSON.stringify({ taskId, xml: TEMPLATE }), { timeout: 10_000 })).json();
    expect(reply).toEqual({ taskId, status: "accepted" });
    for await (const m of done) expect(m.json<{ status: string }>().status).toBe("COMPLETE");
  } finally {
    await nc.drain();
  }

  // The overview: the task completed in the task machine, its actors in the four processes, the timeline.
  await page.waitForSelector('#focus-chart svg[data-machine="task"] g.state.active[data-state="task.completed"]', { timeout: 60_000 });
  await page.waitForSelector('#timeline li[data-type="task.completed"]');
  await page.waitForSelector(`#tasks .task[data-task-id="${taskId}"][data-state="completed"]`);
  await page.screenshot({ path: join(DOCS, "inspector.png"), fullPage: false });

  // The nodes: every node recorded, step 1 clicked, its conversation with the tool call shown.
  await page.locator('#nodes .node-row[data-path="0"][data-state="completed"]').waitFor({ timeout: 60_000 });
  await page.locator('#nodes .node-row[data-path="0.steps.0"]').click();
  await page.locator('#node-detail .node-detail[data-path="0.steps.0"] .tool-call[data-tool="read_file"]').waitFor();
  await page.locator("#nodes").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(DOCS, "inspector-nodes.png"), fullPage: false });

  // A fork: step 3 re-run from the page; steps 1 and 2 are answered from the records, step 3 runs live.
  await page.locator('#nodes .node-row[data-path="0.steps.2"]').click();
  await page.locator('#node-detail .node-detail[data-path="0.steps.2"] .rerun-button').click();
  await page.locator("#node-detail .rerun-start").click();
  await page.waitForURL((url) => url.searchParams.get("task") !== taskId, { timeout: 60_000 });
  await page.waitForSelector("body[data-ready=true]");
  await page.locator('#nodes .node-row[data-path="0"][data-state="completed"]').waitFor({ timeout: 60_000 });
  await page.locator('#nodes .node-row[data-path="0.steps.0"][data-replayed="true"]').click();
  await page.locator('#node-detail .node-detail[data-path="0.steps.0"]').waitFor();
  await page.screenshot({ path: join(DOCS, "inspector-fork.png"), fullPage: false });
  expect(errors).toEqual([]);
  await page.close();
});
