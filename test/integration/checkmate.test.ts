/**
 * The checkmate judge loop (`<task type="judge_loop">`) over a real nats-server with the scripted mock model: PASS
 * on iteration 1, PASS on iteration 3 with every gap fed forward, exhaustion with the best attempt by score,
 * [NEEDS_CLARIFICATION] waiting for the user's input, an unparseable verdict counted as FAIL, a worker's model
 * error reported as a failed iteration, and a re-run that replays recorded calls without flipping a verdict.
 */
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { ask } from "../../actors/ask.js";
import { Requests, type EvaluateRequest, type TaskEvent, type TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

const worker = (key: string, n: number) => ({ regex: `worker in a checkmate loop \\(iteration ${n}/\\d+\\)[\\s\\S]*${key}` });
const judge = (key: string, n: number) => ({ regex: `judge in a checkmate loop \\(iteration ${n}/\\d+\\)[\\s\\S]*${key}` });
const verdict = (result: "PASS" | "FAIL", score: number, gapSummary = "") =>
  JSON.stringify({ result, score, criteria: [{ item: "mentions the sea", pass: result === "PASS", evidence: "…" }], gapSummary });

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // PASS on iteration 1, the verdict in a ```json fence.
        { match: { lastUser: worker("CM-ONE", 1) }, reply: "The sea at dawn." },
        { match: { lastUser: judge("CM-ONE", 1) }, reply: "Here is my verdict:\n```json\n" + verdict("PASS", 92) + "\n```" },
        // PASS on iteration 3, gaps fed forward.
        { match: { lastUser: worker("CM-THREE", 1) }, reply: "attempt one" },
        { match: { lastUser: worker("CM-THREE", 2) }, reply: "attempt two" },
        { match: { lastUser: worker("CM-THREE", 3) }, reply: "attempt three" },
        { match: { lastUser: judge("CM-THREE", 1) }, reply: verdict("FAIL", 30, "GAP-ONE: no title.") },
        { match: { lastUser: judge("CM-THREE", 2) }, reply: verdict("FAIL", 60, "GAP-TWO: no ending.") },
        { match: { lastUser: judge("CM-THREE", 3) }, reply: verdict("PASS", 95) },
        // Exhaustion: the best score is iteration 2's.
        { match: { lastUser: worker("CM-EXHAUST", 1) }, reply: "exhaust one" },
        { match: { lastUser: worker("CM-EXHAUST", 2) }, reply: "exhaust two" },
        { match: { lastUser: worker("CM-EXHAUST", 3) }, reply: "exhaust three" },
        { match: { lastUser: judge("CM-EXHAUST", 1) }, reply: verdict("FAIL", 40, "weak start") },
        { match: { lastUser: judge("CM-EXHAUST", 2) }, reply: verdict("FAIL", 80, "almost") },
        { match: { lastUser: judge("CM-EXHAUST", 3) }, reply: verdict("FAIL", 50, "worse again") },
        // [NEEDS_CLARIFICATION]: the intake asks, the user answers, the intake writes criteria.
        {
          match: { lastUser: { regex: "intake of a checkmate loop[\\s\\S]*CM-ASK[\\s\\S]*THE USER ANSWERED[\\s\\S]*Python please" } },
          reply: "# Acceptance Criteria: script\n## Must Pass (blocking)\n- [ ] written in Python",
        },
        { match: { lastUser: { regex: "intake of a checkmate loop[\\s\\S]*CM-ASK" } }, reply: "[NEEDS_CLARIFICATION]\n1. Which language?" },
        { match: { lastUser: worker("CM-ASK", 1) }, reply: "print('hi')" },
        { match: { lastUser: judge("CM-ASK", 1) }, reply: verdict("PASS", 88) },
        // An unparseable verdict counts as FAIL with a note.
        { match: { lastUser: worker("CM-GARBLE", 1) }, reply: "garble one" },
        { match: { lastUser: worker("CM-GARBLE", 2) }, reply: "garble two" },
        { match: { lastUser: judge("CM-GARBLE", 1) }, reply: "Looks fine to me, ship it." },
        { match: { lastUser: judge("CM-GARBLE", 2) }, reply: verdict("PASS", 70) },
        // worker_timeout: a slow worker is a failed iteration with execution_timeout.
        { match: { lastUser: worker("CM-SLOW", 1) }, reply: "too late", delayMs: 2_000 },
        { match: { lastUser: worker("CM-SLOW", 2) }, reply: "in time" },
        { match: { lastUser: judge("CM-SLOW", 2) }, reply: verdict("PASS", 60) },
        // examples/judge-loop.xml
        { match: { lastUser: worker("cat on a keyboard", 1), system: "careful poet" }, reply: "A cat on a keyboard typed fast…" },
        { match: { lastUser: judge("cat on a keyboard", 1), system: "strict editor" }, reply: verdict("PASS", 85) },
        // A worker's model error is a failed iteration; the judge does not run for it.
        { match: { lastUser: worker("CM-BROKEN", 1) }, status: 400, error: "the model refused" },
        { match: { lastUser: worker("CM-BROKEN", 2) }, reply: "recovered" },
        { match: { lastUser: judge("CM-BROKEN", 2) }, reply: verdict("PASS", 75) },
      ],
      default: { reply: "unexpected: {{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const loop = (task: string, extra = "<criteria><item>mentions the sea</item></criteria>") => `<task type="judge_loop">
  <description>${task}</description>
  ${extra}
</task>`;

async function run(
  xml: string,
  onEvent: (e: TaskEvent, taskId: string, s: Awaited<ReturnType<typeof startStack>>) => void = () => undefined,
): Promise<{ outcome: TaskOutcome; events: TaskEvent[] }> {
  await using s = await startStack({ url: server.url, mock });
  const taskId = newTaskId();
  const events: TaskEvent[] = [];
  const outcome = await s.client.run({ xml, taskId }, (e) => {
    events.push(e);
    onEvent(e, taskId, s);
  });
  return { outcome, events };
}

const prompts = (pattern: RegExp) =>
  mock.requests
    .map(
      (r) =>
        (r.body as { messages: { role: string; content: string | null }[] }).messages.findLast((m) => m.role === "user")?.content ?? "",
    )
    .filter((text) => pattern.test(text));

describe("checkmate loop", () => {
  it("delivers the output when the judge passes iteration 1", async () => {
    const { outcome, events } = await run(loop("CM-ONE write a line about the sea"));
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "The sea at dawn.",
      notes: { termination_reason: "judge_pass", iterations_completed: 1, criteria_source: "given" },
    });
    expect(outcome.notes["final_verdict"]).toMatchObject({
      result: "PASS",
      score: 92,
      parsed: true,
      criteria: [{ item: "mentions the sea", pass: true }],
    });
    expect(events.filter((e) => e.type === "checkmate.iteration").map((e) => e.message)).toEqual(["[checkmate: iteration 1/5]"]);
    expect(events.find((e) => e.type === "checkmate.verdict")?.message).toBe("[checkmate: iteration 1/5] PASS score 92");
  });

  it("passes on iteration 3, the worker seeing the previous attempt and every gap so far", async () => {
    const { outcome, events } = await run(loop("CM-THREE write a poem"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "attempt three", notes: { iterations_completed: 3 } });
    expect(events.filter((e) => e.type === "checkmate.iteration").map((e) => e.message)).toEqual(
      [1, 2, 3].map((n) => `[checkmate: iteration ${n}/5]`),
    );
    const [third] = prompts(/worker in a checkmate loop \(iteration 3\/5\)[\s\S]*CM-THREE/);
    expect(third).toContain("PREVIOUS ATTEMPT:\nattempt two");
    expect(third).toContain("- Iteration 1: GAP-ONE: no title.");
    expect(third).toContain("- Iteration 2: GAP-TWO: no ending.");
    const [first] = prompts(/worker in a checkmate loop \(iteration 1\/5\)[\s\S]*CM-THREE/);
    expect(first).not.toContain("PREVIOUS ATTEMPT");
  });

  it("ends exhausted with the best attempt by score and the final judge report", async () => {
    const { outcome, events } = await run(
      loop("CM-EXHAUST write a poem", "<criteria>a good poem</criteria><max_iterations>3</max_iterations>"),
    );
    expect(outcome).toMatchObject({
      status: "FAILED",
      content: "exhaust two",
      notes: { termination_reason: "max_iterations_reached", best_iteration: 2, iterations_completed: 3 },
      error: { type: "TASK_FAILURE", reason: "execution_halted" },
    });
    expect(outcome.notes["best_verdict"]).toMatchObject({ score: 80 });
    expect(outcome.notes["final_verdict"]).toMatchObject({ result: "FAIL", score: 50, gapSummary: "worse again" });
    expect(events.find((e) => e.type === "checkmate.exhausted")?.message).toContain("best attempt (iteration 2)");
  });

  it("waits for the user's answer when the intake needs clarification, then goes on", async () => {
    const { outcome, events } = await run(loop("CM-ASK write a script", ""), (e, taskId, s) => {
      if (e.type === "continuation.input") void s.client.input(taskId, "Python please");
    });
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "print('hi')",
      notes: { criteria_source: "intake", clarifications: [{ questions: "1. Which language?", answer: "Python please" }] },
    });
    expect(String(outcome.notes["criteria"])).toContain("written in Python");
    expect(events.map((e) => e.state)).toContain("awaiting_input");
    expect(events.find((e) => e.type === "continuation.input")?.message).toBe("1. Which language?");
    // The questions were never locked in as criteria: the worker saw the intake's second answer.
    expect(prompts(/worker in a checkmate loop[\s\S]*CM-ASK/)[0]).toContain("written in Python");
  });

  it("counts an unparseable verdict as FAIL with a note", async () => {
    const { outcome, events } = await run(loop("CM-GARBLE write a poem"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "garble two", notes: { iterations_completed: 2 } });
    const history = outcome.notes["iteration_history"] as { verdict?: { result: string; parsed: boolean; note?: string } }[];
    expect(history[0]?.verdict).toMatchObject({ result: "FAIL", parsed: false, score: 0 });
    expect(history[0]?.verdict?.note).toMatch(/could not be parsed/);
    expect(events.find((e) => e.type === "checkmate.verdict")?.message).toMatch(
      /iteration 1\/5\] FAIL score 0 \(the judge's verdict could not be parsed/,
    );
  });

  it("reports a worker's model error as a failed iteration, without a judge call", async () => {
    const { outcome, events } = await run(loop("CM-BROKEN write a poem"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "recovered", notes: { iterations_completed: 2 } });
    const history = outcome.notes["iteration_history"] as { workerError?: { reason?: string; message: string }; verdict?: unknown }[];
    expect(history[0]?.workerError).toMatchObject({ type: "TASK_FAILURE", reason: "model_error" });
    expect(history[0]?.verdict).toBeUndefined();
    expect(events.find((e) => e.type === "checkmate.worker_error")?.message).toMatch(/^\[checkmate: iteration 1\/5\] worker failed: /);
    expect(prompts(/judge in a checkmate loop \(iteration 1\/5\)[\s\S]*CM-BROKEN/)).toEqual([]);
  });
});

describe("checkmate timeouts", () => {
  it("ends a worker call at worker_timeout: a failed iteration with execution_timeout", async () => {
    const { outcome, events } = await run(
      `<task type="judge_loop" worker_timeout="0.3"><description>CM-SLOW a poem</description><criteria>x</criteria></task>`,
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "in time", notes: { iterations_completed: 2 } });
    const history = outcome.notes["iteration_history"] as { workerError?: unknown }[];
    expect(history[0]?.workerError).toMatchObject({ reason: "execution_timeout", message: "the worker did not answer within 0.3 s" });
    expect(events.some((e) => e.type === "checkmate.worker_error")).toBe(true);
  });
});

describe("examples/judge-loop.xml", () => {
  it("runs with its criteria items, inputs and worker/judge system prompts", async () => {
    const { outcome } = await run(await readFile(new URL("../../examples/judge-loop.xml", import.meta.url), "utf8"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "A cat on a keyboard typed fast…", notes: { criteria_source: "given" } });
    expect(String(outcome.notes["criteria"])).toContain("- Mentions a cat on a keyboard by name");
  });
});

describe("checkmate durability", () => {
  it("replays recorded worker and judge calls on a re-run: a stored verdict is never flipped", async () => {
    const own = await startMockLlm({
      port: 0,
      script: {
        rules: [
          { match: { lastUser: worker("CM-REPLAY", 1) }, reply: "replay one" },
          { match: { lastUser: judge("CM-REPLAY", 1) }, reply: verdict("FAIL", 20, "GAP-R") },
        ],
      },
    });
    try {
      await using s = await startStack({ url: server.url, mock: own });
      const taskId = newTaskId() as EvaluateRequest["taskId"];
      const request: EvaluateRequest = {
        type: "evaluator.evaluate",
        taskId,
        owner: "director-a",
        xml: loop("CM-REPLAY a poem", "<criteria>x</criteria><max_iterations>1</max_iterations>"),
        inputs: {},
      };
      const deps = { bus: s.transport.bus, subjects: s.system.subjects, log: silentLogger, now: () => new Date(), newId: () => "x" };
      const evaluate = (owner: string) => ask(deps, Requests.evaluate, { ...request, owner }, { timeoutMs: 10_000 });
      const first = await evaluate("director-a");
      expect(first.result).toMatchObject({
        status: "FAILED",
        content: "replay one",
        notes: { final_verdict: { result: "FAIL", score: 20 } },
      });
      expect(own.requests).toHaveLength(2);
      // The model would now pass the attempt; the resumed walk replays the recorded verdict instead of asking again.
      own.setScript({ rules: [{ match: { lastUser: judge("CM-REPLAY", 1) }, reply: verdict("PASS", 99) }], default: { reply: "changed" } });
      const again = await evaluate("director-b");
      expect(again.result).toMatchObject({
        status: "FAILED",
        content: "replay one",
        notes: { final_verdict: { result: "FAIL", score: 20, gapSummary: "GAP-R" } },
      });
      expect(own.requests).toHaveLength(2);
    } finally {
      await own.close();
    }
  });
});
