/**
 * The human gates of an interactive checkmate loop over a real nats-server with the scripted mock model, answered
 * with `dirigent input` (the client's `input`): criteria review, start gate, checkpoint; the defaults when no
 * answer comes in time; answers recorded so a re-run of the task asks nothing again; a worker timeout that drops
 * the model request; a PASS verdict without a score.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { ask } from "../../actors/ask.js";
import { createSubjects, decode, Progress, Requests, type EvaluateRequest, type TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
const mockLog = new Recorder<string>();

const worker = (key: string, n: number) => ({ regex: `worker in a checkmate loop \\(iteration ${n}/\\d+\\)[\\s\\S]*${key}` });
const judge = (key: string, n: number) => ({ regex: `judge in a checkmate loop \\(iteration ${n}/\\d+\\)[\\s\\S]*${key}` });
const intake = (key: string, then = "") => ({ regex: `intake of a checkmate loop[\\s\\S]*${key}${then}` });
const verdict = (result: "PASS" | "FAIL", score: number, gapSummary = "") => JSON.stringify({ result, score, criteria: [], gapSummary });

const rules = [
  // Gates answered: the user's feedback revises the criteria, the start gate edits them, a checkpoint redirects.
  { match: { lastUser: intake("G-ANSWER", "[\\s\\S]*FEEDBACK[\\s\\S]*needs a title") }, reply: "- rhymes\n- has a title" },
  { match: { lastUser: intake("G-ANSWER") }, reply: "- rhymes" },
  { match: { lastUser: worker("G-ANSWER", 1) }, reply: "answer one" },
  { match: { lastUser: judge("G-ANSWER", 1) }, reply: verdict("FAIL", 40, "too long") },
  { match: { lastUser: worker("G-ANSWER", 2) }, reply: "answer two" },
  { match: { lastUser: judge("G-ANSWER", 2) }, reply: verdict("PASS", 90) },
  // No answers: the defaults (go, continue).
  { match: { lastUser: worker("G-DEFAULT", 1) }, reply: "default one" },
  { match: { lastUser: judge("G-DEFAULT", 1) }, reply: verdict("FAIL", 10, "weak") },
  { match: { lastUser: worker("G-DEFAULT", 2) }, reply: "default two" },
  { match: { lastUser: judge("G-DEFAULT", 2) }, reply: verdict("PASS", 70) },
  // Recorded answers: a clarification and a start gate, replayed on a re-run.
  { match: { lastUser: intake("G-RECORD", "[\\s\\S]*THE USER ANSWERED[\\s\\S]*in Python") }, reply: "- written in Python" },
  { match: { lastUser: intake("G-RECORD") }, reply: "[NEEDS_CLARIFICATION]\n1. Which language?" },
  { match: { lastUser: worker("G-RECORD", 1) }, reply: "print('hi')" },
  { match: { lastUser: judge("G-RECORD", 1) }, reply: verdict("PASS", 80) },
  // A worker past its timeout: the model request is dropped.
  { match: { lastUser: worker("G-SLOW", 1) }, reply: "too late", delayMs: 30_000 },
  { match: { lastUser: worker("G-SLOW", 2) }, reply: "in time" },
  { match: { lastUser: judge("G-SLOW", 2) }, reply: JSON.stringify({ result: "PASS", criteria: [] }) },
  // A judge past its timeout: its request is dropped too; the iteration counts as FAIL.
  { match: { lastUser: worker("G-JUDGESLOW", 1) }, reply: "judged too slowly" },
  { match: { lastUser: judge("G-JUDGESLOW", 1) }, reply: verdict("PASS", 99), delayMs: 30_000 },
  { match: { lastUser: worker("G-JUDGESLOW", 2) }, reply: "judged in time" },
  { match: { lastUser: judge("G-JUDGESLOW", 2) }, reply: verdict("PASS", 80) },
];

/** Lines of the mock model saying it dropped the held request of the rule whose reply is `reply`. */
const dropped = (log: readonly string[], reply: string) =>
  log.filter((l) => l.includes(`answeredBy=${rules.findIndex((r) => r.reply === reply)} → aborted by client`));

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    log: (line) => mockLog.push(line),
    script: {
      rules,
      default: { reply: "unexpected: {{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const loop = (key: string, attrs: string, extra = "") =>
  `<task type="judge_loop" ${attrs}><description>${key} write a poem</description>${extra}</task>`;

/** Runs `xml` as a task, answering each question with the next of `answers` (none left: no answer). */
async function run(s: Stack, xml: string, answers: string[] = []) {
  const taskId = newTaskId();
  const events: TaskEvent[] = [];
  const outcome = await s.client.run({ xml, taskId }, (e) => {
    events.push(e);
    const answer = e.type === "continuation.input" ? answers.shift() : undefined;
    if (answer !== undefined) void s.client.input(taskId, answer);
  });
  return { outcome, events, questions: events.filter((e) => e.type === "continuation.input") };
}

const prompts = (pattern: RegExp) =>
  mock.requests
    .map(
      (r) =>
        (r.body as { messages: { role: string; content: string | null }[] }).messages.findLast((m) => m.role === "user")?.content ?? "",
    )
    .filter((text) => pattern.test(text));

describe("interactive checkmate gates over NATS", () => {
  it("asks for approval of the criteria, go/cancel/edit before the first worker and continue/redirect/stop after a FAIL", async () => {
    await using s = await startStack({ url: server.url, mock });
    const answers = ["the poem needs a title", "yes", "edit: - rhymes\n- has a title\n- at most 4 lines", "redirect: make it shorter"];
    const { outcome, events, questions } = await run(s, loop("G-ANSWER", 'interactive="true"'), answers);
    expect(questions.map((q) => q.data?.["gate"])).toEqual(["criteria", "criteria", "start", "checkpoint"]);
    expect(questions[1]?.message).toContain("- has a title");
    expect(questions[3]?.message).toContain("FAIL score 40.\nGaps: too long");
    expect(events.map((e) => e.state)).toContain("awaiting_input");
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "answer two",
      notes: { criteria: "- rhymes\n- has a title\n- at most 4 lines", criteria_source: "user", criteria_approved: true },
    });
    expect(outcome.notes["gates"]).toMatchObject([
      { gate: "criteria", decision: "revise" },
      { gate: "criteria", decision: "approve" },
      { gate: "start", decision: "edit" },
      { gate: "checkpoint", iteration: 1, decision: "redirect", answer: "redirect: make it shorter" },
    ]);
    const [second] = prompts(/worker in a checkmate loop \(iteration 2\/5\)[\s\S]*G-ANSWER/);
    expect(second).toContain("USER DIRECTION (the user's guidance; follow it):\n- After iteration 1: make it shorter");
    expect(second).toContain("- at most 4 lines");
  });

  it("takes each gate's default when no answer comes in time: go, then continue", async () => {
    await using s = await startStack({ url: server.url, mock });
    const { outcome, events } = await run(s, loop("G-DEFAULT", 'interactive="true" gate_timeout="0.3"', "<criteria>- rhymes</criteria>"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "default two" });
    expect(events.filter((e) => e.type === "checkmate.gate").map((e) => e.message)).toEqual([
      "checkmate: start gate: go (no answer in time: the default)",
      "checkmate: checkpoint gate: continue (no answer in time: the default)",
    ]);
    expect(events.filter((e) => e.type === "continuation.resumed").map((e) => e.message)).toEqual([
      "no answer in time",
      "no answer in time",
    ]);
  });
});

describe("answers recorded", () => {
  it("a re-run of the task (a new owner) gets the recorded answers: no question is published again, no model call repeated", async () => {
    const root = randomRoot();
    // No Director: the evaluations are asked for directly, as a Director would, and their progress read as it comes.
    await using s = await startStack({ url: server.url, mock, root, roles: ["evaluator", "handler", "memory"] });
    const taskId = newTaskId() as EvaluateRequest["taskId"];
    const events = new Recorder<Progress>();
    s.transport.bus.subscribe(createSubjects(root).progress(taskId), (m) => {
      const d = decode(Progress, m.data);
      if (!d.ok) return;
      events.push(d.value);
      if (d.value.event !== "continuation.input") return;
      void s.client.input(taskId, d.value.data?.["gate"] === "clarification" ? "in Python" : "go");
    });
    await s.transport.bus.flush();
    const request: EvaluateRequest = { type: "evaluator.evaluate", taskId, xml: loop("G-RECORD", 'interactive="true"'), inputs: {} };
    const deps = { bus: s.transport.bus, subjects: s.system.subjects, log: silentLogger, now: () => new Date(), newId: () => "x" };
    const evaluate = (owner: string) => ask(deps, Requests.evaluate, { ...request, owner }, { timeoutMs: 15_000 });
    const first = await evaluate("director-a");
    expect(first.result).toMatchObject({ status: "COMPLETE", content: "print('hi')", notes: { criteria: "- written in Python" } });
    const asked = events.values.filter((e) => e.event === "continuation.input").map((e) => e.data?.["gate"]);
    expect(asked).toEqual(["clarification", "criteria", "start"]);
    const calls = mock.requests.length;
    const seen = events.values.length;

    const again = await evaluate("director-b");
    expect(again.result).toMatchObject({
      status: "COMPLETE",
      content: "print('hi')",
      notes: {
        clarifications: [{ questions: "1. Which language?", answer: "in Python" }],
        gates: [{ gate: "criteria" }, { gate: "start" }],
      },
    });
    const rerun = events.values.slice(seen);
    expect(rerun.some((e) => e.event === "checkmate.iteration")).toBe(true);
    expect(rerun.filter((e) => e.event === "continuation.input" || e.event === "continuation.resumed")).toEqual([]);
    expect(mock.requests.length).toBe(calls);
  });
});

describe("timeouts cancel", () => {
  it("a worker past worker_timeout has its model request dropped; a PASS without a score is a PASS", async () => {
    await using s = await startStack({ url: server.url, mock });
    const { outcome, events } = await run(s, loop("G-SLOW", 'worker_timeout="0.5"', "<criteria>x</criteria>"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "in time", notes: { iterations_completed: 2 } });
    const history = outcome.notes["iteration_history"] as { workerError?: unknown }[];
    expect(history[0]?.workerError).toMatchObject({ reason: "execution_timeout" });
    // The Handler stopped the session: the mock's held request was dropped, long before its 30 s delay.
    await mockLog.until((v) => dropped(v, "too late").length === 1, "the slow request to be dropped");
    expect(outcome.notes["final_verdict"]).toMatchObject({
      result: "PASS",
      score: 100,
      parsed: true,
      note: "the judge gave no score; 100 taken for ranking",
    });
    expect(events.find((e) => e.type === "checkmate.verdict" && e.message?.includes("iteration 2/5"))?.message).toBe(
      "[checkmate: iteration 2/5] PASS score 100 (the judge gave no score; 100 taken for ranking)",
    );
  });

  it("a judge past judge_timeout has its model request dropped; the iteration counts as FAIL", async () => {
    await using s = await startStack({ url: server.url, mock });
    const { outcome } = await run(s, loop("G-JUDGESLOW", 'judge_timeout="0.5"', "<criteria>x</criteria>"));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "judged in time", notes: { iterations_completed: 2 } });
    const history = outcome.notes["iteration_history"] as { verdict?: unknown; judgeError?: unknown }[];
    expect(history[0]?.verdict).toMatchObject({ result: "FAIL", parsed: false });
    expect(history[0]?.judgeError).toMatchObject({ reason: "execution_timeout", message: "the judge did not answer within 0.5 s" });
    await mockLog.until((v) => dropped(v, verdict("PASS", 99)).length === 1, "the slow judge request to be dropped");
  });
});
