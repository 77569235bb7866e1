/**
 * "Re-run from here" in headless Debian Chromium: a three-step sequential task runs on `dirigent up` over a real
 * nats-server with the scripted mock model (started in this process, so the test counts the requests it gets); on the
 * page of `dirigent inspect`, clicking step 2, then "Re-run from here", editing the task's input in the form and
 * starting the fork moves the page to the new task, which completes with step 1 replayed from the original's record:
 * the model was asked for steps 2 and 3 only, step 3 with the edited input.
 */
import { connect } from "@nats-io/transport-node";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, type TaskStatusReply } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type MockScript } from "../../runtime/model/mock-server.js";
import { launchChromium } from "../support/chromium.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const SCRIPT: MockScript = {
  rules: [
    { match: { lastUser: "Step one" }, reply: "facts A and B" },
    { match: { lastUser: "Step two" }, reply: "summary of A and B" },
    { match: { lastUser: "about waves" }, reply: "Waves title" },
    { match: { lastUser: "about tides" }, reply: "Tides title" },
  ],
  default: { reply: "unexpected" },
};

const XML = `<task type="sequential">
  <description>Three steps about a topic.</description>
  <inputs><input name="topic" from="topic"/></inputs>
  <steps>
    <task><description>Step one: list the facts.</description></task>
    <task><description>Step two: summarise {{previous_result}}</description></task>
    <task><description>Step three: a title about {{topic}} for {{previous_result}}</description></task>
  </steps>
</task>`;

let server: TestNatsServer;
let mock: MockLlmServer;
let browser: Browser;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: SCRIPT });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

describe("inspector: re-run from a node", () => {
  it("forks the task from the clicked node with an edited input and shows the fork", { timeout: 180_000 }, async () => {
    const root = randomRoot();
    const inspector = startCli(["inspect", "--port", "0", "--nats", server.url, "--prefix", root]);
    processes.push(inspector);
    const [, pageUrl = ""] = await inspector.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/);
    const env = { OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "sk-rerun-test", DIRIGENT_MODEL_MAX_RETRIES: "0", DIRIGENT_INSPECT: "on" };
    const up = startCli(["up", "--nats", server.url, "--prefix", root], env);
    processes.push(up);
    await up.waitFor(/ready/);

    const subjects = createSubjects(root);
    const taskId = `rerun-${Date.now()}`;
    const nc = await connect({ servers: server.url, name: "inspector-rerun-test" });
    try {
      const done = nc.subscribe(subjects.taskResult(taskId), { max: 1 });
      await nc.request(subjects.submit, JSON.stringify({ taskId, xml: XML, inputs: { topic: "tides" } }), { timeout: 10_000 });
      for await (const m of done) expect(m.json<{ content: string }>().content).toBe("Tides title");
      expect(mock.requests.length).toBe(3);

      const page = await browser.newPage({ viewport: { width: 1600, height: 1100 } });
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      await page.goto(`${pageUrl}?task=${taskId}`);
      await page.waitForSelector("body[data-ready=true]");
      const step2 = page.locator('#nodes .node-row[data-path="0.steps.1"][data-state="completed"]');
      await step2.waitFor({ timeout: 60_000 });
      await step2.click();
      const detail = page.locator('#node-detail .node-detail[data-path="0.steps.1"]');
      await detail.waitFor();
      await page.locator("#node-detail .rerun-button").click();
      const inputs = page.locator("#node-detail textarea.rerun-inputs");
      await inputs.waitFor();
      expect(JSON.parse(await inputs.inputValue())).toEqual({ topic: "tides" });
      await inputs.fill(JSON.stringify({ topic: "waves" }));
      await page.locator("#node-detail .rerun-start").click();

      // The page moves to the fork, which completes with its three nodes, step 1 replayed.
      await page.waitForURL((url) => url.searchParams.get("task") !== taskId, { timeout: 30_000 });
      const fork = new URL(page.url()).searchParams.get("task") ?? "";
      expect(fork).not.toBe("");
      await page.waitForSelector("body[data-ready=true]");
      await page.locator('#nodes .node-row[data-path="0.steps.2"][data-state="completed"]').waitFor({ timeout: 60_000 });
      expect(await page.locator("#detail-task").textContent()).toBe(fork);
      expect(await page.locator('#nodes .node-row[data-path="0.steps.0"]').getAttribute("data-replayed")).toBe("true");
      // The replayed step's tokens were paid by the original: shown struck through, and left out of the fork's total.
      await page.locator('#nodes .node-row[data-path="0"][data-state="completed"]').waitFor({ timeout: 60_000 });
      const cells = await page.locator("#nodes .node-row").evaluateAll((trs) =>
        trs.map((tr) => ({
          path: tr.getAttribute("data-path") ?? "",
          replayed: tr.hasAttribute("data-replayed"),
          tokens: tr.querySelectorAll("td")[3]?.textContent ?? "",
          paidBefore: tr.querySelectorAll("td")[3]?.classList.contains("paid-before") ?? false,
        })),
      );
      expect(cells.find((c) => c.path === "0.steps.0")).toMatchObject({ replayed: true, paidBefore: true });
      const live = cells.filter((c) => c.path.startsWith("0.steps.") && !c.replayed).reduce((n, c) => n + Number(c.tokens), 0);
      expect(live).toBeGreaterThan(0);
      expect(cells.find((c) => c.path === "0")?.tokens).toBe(`Σ ${live}`);
      const status = (await nc.request(subjects.taskGet(fork), "{}", { timeout: 10_000 })).json<TaskStatusReply>();
      expect(status.result?.content).toBe("Waves title");
      expect(mock.requests.length).toBe(5);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await nc.drain();
    }
  });
});
