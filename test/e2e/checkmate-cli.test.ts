/** `dirigent checkmate`: the judge loop from the command line, with an embedded runtime on a test nats-server. */
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
let criteria: string;

const verdict = (result: "PASS" | "FAIL", score: number, gapSummary = "") =>
  JSON.stringify({ result, score, criteria: [{ item: "has a title", pass: result === "PASS", evidence: "-" }], gapSummary });
const role = (name: string, key: string, n: number) => ({ regex: `${name} in a checkmate loop \\(iteration ${n}/\\d+\\)[\\s\\S]*${key}` });

const script = () => ({
  rules: [
    { match: { lastUser: role("worker", "CLI-PASS", 1) }, reply: "untitled poem" },
    { match: { lastUser: role("worker", "CLI-PASS", 2) }, reply: "# Title\npoem" },
    { match: { lastUser: role("judge", "CLI-PASS", 1) }, reply: verdict("FAIL", 30, "Add a title.") },
    { match: { lastUser: role("judge", "CLI-PASS", 2) }, reply: verdict("PASS", 90) },
    { match: { lastUser: role("worker", "CLI-KILL", 1) }, reply: "first try" },
    { match: { lastUser: role("judge", "CLI-KILL", 1) }, reply: verdict("FAIL", 30, "Add a title.") },
    { match: { lastUser: role("worker", "CLI-KILL", 2) }, reply: "never delivered", delayMs: 20_000 },
    { match: { lastUser: role("worker", "CLI-EXHAUST", 1) }, reply: "best try" },
    { match: { lastUser: role("worker", "CLI-EXHAUST", 2) }, reply: "worse try" },
    { match: { lastUser: role("judge", "CLI-EXHAUST", 1) }, reply: verdict("FAIL", 70, "close") },
    { match: { lastUser: role("judge", "CLI-EXHAUST", 2) }, reply: verdict("FAIL", 20, "worse") },
    { match: { lastUser: { regex: "intake of a checkmate loop[\\s\\S]*CLI-GATE" } }, reply: "- rhymes" },
    { match: { lastUser: role("worker", "CLI-GATE", 1) }, reply: "untitled gate poem" },
    { match: { lastUser: role("judge", "CLI-GATE", 1) }, reply: verdict("FAIL", 30, "Add a title.") },
    { match: { lastUser: { regex: "CLI-GATE[\\s\\S]*USER DIRECTION[\\s\\S]*call it Dawn" } }, reply: "# Dawn\npoem" },
    { match: { lastUser: role("judge", "CLI-GATE", 2) }, reply: verdict("PASS", 95) },
  ],
  default: { reply: "unexpected" },
});

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: script(),
  });
  dir = mkdtempSync(join(tmpdir(), "dirigent-checkmate-cli-"));
  criteria = join(dir, "criteria.md");
  writeFileSync(criteria, "## Must Pass (blocking)\n- [ ] has a title\n");
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" });
const checkmate = (prefix: string, ...args: string[]) =>
  startCli(["checkmate", ...args, "--nats", server.url, "--prefix", prefix], modelEnv());

describe("dirigent checkmate", () => {
  it("prints each iteration and verdict, then the output on PASS; --resume re-attaches without calling the model", async () => {
    const prefix = randomRoot();
    const cli = checkmate(
      prefix,
      "CLI-PASS write a poem with {{braces}} & <tags>",
      "--criteria",
      criteria,
      "--max-iter",
      "3",
      "--task-id",
      "cm-cli-pass",
    );
    expect(await cli.exited).toBe(0);
    const out = cli.output();
    expect(out).toContain(
      "[checkmate: iteration 1/3]\n[checkmate: iteration 1/3] FAIL score 30\n[checkmate: iteration 2/3]\n[checkmate: iteration 2/3] PASS score 90",
    );
    expect(out).toContain("checkmate: PASS after 2 iteration(s)\n\n# Title\npoem");
    // The task's text reached the worker verbatim: never parsed as XML nor substituted.
    expect(mock.requests.some((r) => JSON.stringify(r.body).includes("CLI-PASS write a poem with {{braces}} & <tags>"))).toBe(true);
    const calls = mock.requests.length;
    const again = checkmate(prefix, "--resume", "cm-cli-pass");
    expect(await again.exited).toBe(0);
    expect(again.output()).toContain("checkmate: PASS after 2 iteration(s)\n\n# Title\npoem");
    expect(mock.requests.length).toBe(calls);
  });

  it("ends exhausted with the best attempt and the final judge report, exit code 1", async () => {
    const cli = checkmate(
      randomRoot(),
      "CLI-EXHAUST write a poem",
      "--criteria",
      criteria,
      "--max-iter",
      "2",
      "--worker-timeout",
      "30",
      "--judge-timeout",
      "30",
    );
    expect(await cli.exited).toBe(1);
    const out = cli.output();
    expect(out).toContain("checkmate: max iterations reached. Delivering best attempt (iteration 1) + final judge report.");
    expect(out).toContain("best attempt (iteration 1):\nbest try");
    expect(out).toMatch(/final judge report:\n\{[\s\S]*"score": 20/);
  });

  it("resumes after the process is killed mid-iteration: finished calls replay, the stored verdict stands", async () => {
    const prefix = randomRoot();
    const env = { ...modelEnv(), DIRIGENT_ACK_WAIT_MS: "1500" };
    const start = (...args: string[]) => startCli(["checkmate", ...args, "--nats", server.url, "--prefix", prefix], env);
    const judged = () =>
      mock.requests.filter((r) => /judge in a checkmate loop \(iteration 1\/3\)[\s\S]*CLI-KILL/.test(JSON.stringify(r.body))).length;
    const first = start("CLI-KILL write a poem", "--criteria", criteria, "--max-iter", "3", "--task-id", "cm-cli-kill");
    await first.waitFor(/\[checkmate: iteration 2\/3\]\n/);
    first.child.kill("SIGKILL");
    await first.exited;
    expect(judged()).toBe(1);
    try {
      // Were iteration 1 judged again, it would now pass: the resumed task must replay the recorded FAIL instead.
      mock.setScript({
        rules: [
          { match: { lastUser: role("judge", "CLI-KILL", 1) }, reply: verdict("PASS", 99) },
          { match: { lastUser: role("worker", "CLI-KILL", 2) }, reply: "second try" },
          { match: { lastUser: role("judge", "CLI-KILL", 2) }, reply: verdict("PASS", 90) },
        ],
      });
      const resumed = start("--resume", "cm-cli-kill");
      expect(await resumed.exited).toBe(0);
      expect(resumed.output()).toContain("checkmate: PASS after 2 iteration(s)\n\nsecond try");
      expect(judged()).toBe(1);
    } finally {
      mock.setScript(script());
    }
  });

  it("--interactive asks each gate on the terminal and reads the answers from stdin", async () => {
    const args = ["checkmate", "CLI-GATE write a poem", "--interactive", "--max-iter", "3", "--nats", server.url, "--prefix", randomRoot()];
    const cli = startCli(args, modelEnv(), { stdin: "pipe" });
    await cli.waitFor(/\? checkmate: proposed acceptance criteria \(round 1\/3\):\n\n- rhymes\n/);
    cli.child.stdin?.write("yes\n");
    await cli.waitFor(/\? checkmate: ready to start \(up to 3 iterations\)/);
    cli.child.stdin?.write("edit: - rhymes - has a title\n");
    await cli.waitFor(/\? \[checkmate: iteration 1\/3\] FAIL score 30\.\nGaps: Add a title\./);
    cli.child.stdin?.write("redirect: call it Dawn\n");
    expect(await cli.exited).toBe(0);
    const out = cli.output();
    expect(out).toContain("checkmate: criteria gate: approve\n");
    expect(out).toContain("checkmate: start gate: edit\n");
    expect(out).toContain("checkmate: checkpoint gate: redirect\n");
    expect(out).toContain("checkmate: PASS after 2 iteration(s)\n\n# Dawn\npoem");
    const worker2 = mock.requests.find((r) => /worker in a checkmate loop \(iteration 2\/3\)[\s\S]*CLI-GATE/.test(JSON.stringify(r.body)));
    expect(JSON.stringify(worker2?.body)).toContain("- has a title");
  });

  it("rejects a missing task and a bad --max-iter with exit code 2", async () => {
    expect(await checkmate(randomRoot()).exited).toBe(2);
    expect(await checkmate(randomRoot(), "task", "--max-iter", "zero").exited).toBe(2);
  });
});
