/** `dirigent run --stream` prints the answer as it arrives; `--max-tokens` / `--max-cost` bound the task. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let dir: string;
let file: string;

const ANSWER = "Small actors listen, a message crosses the bus, the conductor nods.";

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: ANSWER, usage: { prompt_tokens: 700, completion_tokens: 300 } }] } });
  dir = mkdtempSync(join(tmpdir(), "dirigent-budget-cli-"));
  file = join(dir, "poem.xml");
  writeFileSync(file, "<task><description>Write a poem</description></task>");
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" });
const run = (...args: string[]) => startCli(["run", file, "--nats", server.url, "--prefix", randomRoot(), ...args], modelEnv());

describe("dirigent run --stream, --max-tokens, --max-cost", () => {
  it("--stream prints the answer's pieces inline as they arrive, before the result", async () => {
    const cli = run("--stream");
    expect(await cli.exited).toBe(0);
    const out = cli.output();
    // The deltas form one line of their own, between the node's start and the result.
    const lines = out.split("\n");
    const streamed = lines.findIndex((l) => l === ANSWER);
    expect(streamed).toBeGreaterThan(lines.findIndex((l) => /node\.started/.test(l)));
    expect(lines.findIndex((l) => /task\.completed/.test(l))).toBeGreaterThan(streamed);
    expect(lines.findIndex((l) => l === "result: COMPLETE")).toBeGreaterThan(streamed);
    // The answer is printed once, under the one line that stands for all its model.delta events.
    expect(lines.filter((l) => l === ANSWER)).toHaveLength(1);
    expect(lines.filter((l) => /model\.delta/.test(l))).toHaveLength(1);
  });

  it("prints no deltas without --stream", async () => {
    const cli = run();
    expect(await cli.exited).toBe(0);
    expect(
      cli
        .output()
        .split("\n")
        .filter((l) => l === ANSWER),
    ).toHaveLength(1); // the result's content only
  });

  it("--max-tokens ends the task with RESOURCE_EXHAUSTION budget and exit code 1", async () => {
    const cli = run("--max-tokens", "10");
    expect(await cli.exited).toBe(1);
    expect(cli.output()).toMatch(/result: FAILED\nerror: RESOURCE_EXHAUSTION \(budget\): the task's token budget of 10 reached \(0 used\)/);
  });

  it("--max-cost is checked with the price table, and the task's cost is printed", async () => {
    const prices = { DIRIGENT_MODEL_PRICES: JSON.stringify({ "gpt-4o-mini": { input: 1, output: 2 } }) };
    const within = startCli(["run", file, "--nats", server.url, "--prefix", randomRoot(), "--max-cost", "1"], { ...modelEnv(), ...prices });
    expect(await within.exited).toBe(0);
    // 700 × 1 + 300 × 2 per 1M tokens.
    expect(within.output()).toMatch(/task usage: \{"promptTokens":700,"completionTokens":300\}, cost 0\.0013/);
    const over = startCli(["run", file, "--nats", server.url, "--prefix", randomRoot(), "--max-cost", "0.000001"], {
      ...modelEnv(),
      ...prices,
    });
    expect(await over.exited).toBe(1);
    expect(over.output()).toMatch(/RESOURCE_EXHAUSTION \(budget\): the task's cost budget of 0\.000001 reached/);
  });

  it("refuses a bad budget with exit code 2", async () => {
    const cli = run("--max-tokens", "lots");
    expect(await cli.exited).toBe(2);
    expect(cli.output()).toMatch(/--max-tokens 'lots': must be a positive integer/);
  });
});
