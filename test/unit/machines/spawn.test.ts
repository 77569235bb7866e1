/**
 * Spawned subtasks of the continuation machine: spawn_subtask answers with a handle at once, await_subtasks waits for
 * them (or its timeout, on a simulated clock), cancel_subtask stops one, and a session that ends cancels the ones
 * still running and reports them; depth limit and cycle detection apply to a spawn as to run_subtask.
 */
import { describe, expect, it } from "vitest";
import { createActor, fromPromise, SimulatedClock, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import {
  continuationMachine,
  RESERVED,
  signatureOf,
  type SubtaskInput,
  type SuspendedResult,
} from "../../../machines/evaluator/continuation.js";
import { rootEnv, type Env } from "../../../machines/language/env.js";
import type { SessionState, SubtaskRequest, TaskResult } from "../../../protocol/index.js";

const session: SessionState = {
  messages: [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
  ],
  toolCallId: "call-1",
  turns: 1,
  usage: { promptTokens: 1, completionTokens: 1 },
  context: { used: 1, limit: 100, peak: 1 },
  reportedTokens: 0,
  warned: false,
  malformedToolCalls: 0,
  model: "m",
};
const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const asking = (notes: Record<string, unknown>): SuspendedResult => ({ content: "so far", status: "CONTINUATION", notes, session });
const request = (description: string): SubtaskRequest => ({ type: "atomic", description });
const spawn = (description: string) => asking({ spawn_request: request(description) });
const awaiting = (args: Record<string, unknown> = {}) => asking({ await_request: args });
const cancel = (handle: string) => asking({ cancel_request: { handle } });

/** One spawned child: its input, whether it was aborted, and how to settle it. */
interface Child {
  input: SubtaskInput;
  aborted: () => boolean;
  settle: (result: TaskResult) => void;
}

/**
 * The machine with subtasks that settle when the test says so, and a session that answers each resume with the
 * next step of `steps` (its argument: the answer it was resumed with).
 */
function harness(first: SuspendedResult, steps: Array<(answer: string) => SuspendedResult>, env: Env = rootEnv()) {
  const clock = new SimulatedClock();
  const children: Child[] = [];
  const answers: string[] = [];
  const progress: string[] = [];
  const machine = continuationMachine.provide({
    actions: { progress: (_, p) => progress.push(p.event) },
    actors: {
      runSubtask: fromPromise<TaskResult, SubtaskInput>(
        ({ input, signal }) => new Promise((resolve) => children.push({ input, aborted: () => signal.aborted, settle: resolve })),
      ),
      resumeAtomic: fromPromise(async ({ input }) => {
        answers.push(input.answer);
        const step = steps[answers.length - 1];
        return step ? step(input.answer) : ok("finished");
      }),
    },
  });
  const actor = createActor(machine, { clock, input: { path: "0", env, result: first, maxDepth: 5, maxEvaluations: 5 } }).start();
  actor.send(START);
  return { actor, clock, children, answers, progress };
}

/** Lets the promise reactions (effects answering, children settling) run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("spawned subtasks", () => {
  it("spawns two subtasks that run at once, answers each spawn with its handle, and awaits both", async () => {
    const { actor, children, answers, progress } = harness(spawn("first"), [() => spawn("second"), () => awaiting(), () => ok("both in")]);
    await waitFor(actor, (s) => s.matches("awaitingSpawned"));
    // Both children run while the session goes on: neither has been settled yet.
    expect(children.map((c) => [c.input.scope, c.input.number, c.input.request.description])).toEqual([
      ["spawn", 1, "first"],
      ["spawn", 2, "second"],
    ]);
    expect(answers).toEqual(['{"handle":"s1"}', '{"handle":"s2"}']);
    expect(children[0]?.input.env.bindings[RESERVED.chain]).toEqual([signatureOf(request("first"))]);
    children[1]?.settle(ok("two"));
    await settle();
    // One of the two awaited is still running: the await goes on.
    expect(actor.getSnapshot().matches("awaitingSpawned")).toBe(true);
    children[0]?.settle(ok("one"));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(JSON.parse(answers[2] ?? "")).toEqual({
      s1: { status: "complete", content: "one" },
      s2: { status: "complete", content: "two" },
    });
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "both in", notes: { spawned_subtasks: 2 } });
    expect(snap.output?.notes).not.toHaveProperty("cancelled_subtasks");
    expect(progress).toContain("continuation.spawn");
    expect(progress).toContain("continuation.await");
  });

  it("answers an await whose timeout passes with the still-running ones as running", async () => {
    const { actor, clock, children, answers } = harness(spawn("slow"), [() => awaiting({ timeout_ms: 1000 }), () => ok("gave up")]);
    await waitFor(actor, (s) => s.matches("awaitingSpawned"));
    clock.increment(999);
    expect(actor.getSnapshot().matches("awaitingSpawned")).toBe(true);
    clock.increment(1);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(JSON.parse(answers[1] ?? "")).toEqual({ s1: { status: "running" } });
    // The session ended without it: it was cancelled and reported.
    expect(children[0]?.aborted()).toBe(true);
    expect(snap.output?.notes).toMatchObject({ cancelled_subtasks: ["s1"] });
  });

  it("cancels a running spawned subtask and answers with its status; a later await has nothing left to wait for", async () => {
    const { actor, children, answers } = harness(spawn("doomed"), [() => cancel("s1"), () => awaiting(), () => ok("done")]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(children[0]?.aborted()).toBe(true);
    expect(JSON.parse(answers[1] ?? "")).toEqual({ handle: "s1", status: "cancelled", content: "" });
    expect(answers[2]).toBe("{}");
    expect(snap.output?.notes).not.toHaveProperty("cancelled_subtasks");
  });

  it("reports a failed spawned subtask to the await without failing the session, and unknown handles as unknown", async () => {
    const { actor, children, answers } = harness(spawn("fragile"), [() => awaiting({ handles: ["s1", "s7"] }), () => ok("coped")]);
    await waitFor(actor, (s) => s.matches("awaitingSpawned"));
    children[0]?.settle({
      content: "",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "model_error", message: "boom" },
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(JSON.parse(answers[1] ?? "")).toEqual({
      s1: { status: "failed", content: "", error: "boom" },
      s7: { status: "unknown", error: "no subtask was spawned with handle s7" },
    });
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "coped" });
  });

  it("cancels the subtasks a finished session never awaited and reports them; settled ones are left alone", async () => {
    const { actor, children } = harness(spawn("quick"), [
      () => spawn("forgotten"),
      () => {
        children[0]?.settle(ok("quick done"));
        return ok("finished early");
      },
    ]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.notes).toMatchObject({ spawned_subtasks: 2, cancelled_subtasks: ["s2"] });
    expect(children[1]?.aborted()).toBe(true);
    expect(children[0]?.aborted()).toBe(false);
  });

  it("records a spawned subtask that settles while the session waits for a run_subtask child", async () => {
    const { actor, children, answers } = harness(spawn("background"), [
      () => asking({ subtask_request: request("foreground") }),
      () => awaiting(),
      () => ok("all done"),
    ]);
    await waitFor(actor, (s) => s.matches("awaitingSubtask"));
    expect(children.map((c) => [c.input.scope, c.input.number])).toEqual([
      ["spawn", 1],
      ["subtask", 1],
    ]);
    children[0]?.settle(ok("background result"));
    await settle();
    expect(actor.getSnapshot().matches("awaitingSubtask")).toBe(true);
    children[1]?.settle(ok("foreground result"));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(answers[1]).toBe("foreground result");
    expect(JSON.parse(answers[2] ?? "")).toEqual({ s1: { status: "complete", content: "background result" } });
    expect(snap.output?.notes).toMatchObject({ subtasks: 1, spawned_subtasks: 1 });
  });

  it("stops every spawned subtask when the continuation itself is stopped (the task cancelled)", async () => {
    const { actor, children } = harness(spawn("a"), [() => spawn("b"), () => awaiting()]);
    await waitFor(actor, (s) => s.matches("awaitingSpawned"));
    actor.stop();
    expect(children.map((c) => c.aborted())).toEqual([true, true]);
  });

  it("fails the task past the depth limit, as run_subtask does", async () => {
    const env = rootEnv({ [RESERVED.chain]: ["a", "b"], [RESERVED.maxDepth]: 2 });
    const { actor, children } = harness(spawn("too deep"), [], env);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(children).toEqual([]);
    expect(snap.output?.error).toMatchObject({ reason: "subtask_failure", details: { kind: "depth_limit", limit: 2 } });
  });

  it("refuses a spawn of a request already running on the path (a cycle), and cancels the ones spawned before", async () => {
    const env = rootEnv({ [RESERVED.chain]: [signatureOf(request("again"))] });
    const { actor, children } = harness(spawn("fine"), [() => spawn("again")], env);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "subtask_failure", details: { kind: "cycle" } });
    expect(snap.output?.notes).toMatchObject({ cancelled_subtasks: ["s1"] });
    expect(children).toHaveLength(1);
    expect(children[0]?.aborted()).toBe(true);
  });
});
