import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { reportedState, taskMachine, type Announcement } from "../../../machines/director/task.js";
import type { TaskResult } from "../../../protocol/index.js";
import { tid } from "../../support/ids.js";

const input = { taskId: tid("t1"), xml: "<task/>", inputs: {} };

function harness(evaluate: (signal: AbortSignal) => Promise<TaskResult>) {
  const announced: Announcement[] = [];
  const signals: AbortSignal[] = [];
  const machine = taskMachine.provide({
    actors: {
      evaluate: fromPromise(async ({ signal }) => {
        signals.push(signal);
        return evaluate(signal);
      }),
    },
    actions: { announce: (_, a) => announced.push(a) },
  });
  const actor = createActor(machine, { input }).start();
  return { actor, announced, signals };
}

const complete: TaskResult = { content: "ok", status: "COMPLETE", notes: {} };

describe("task lifecycle machine", () => {
  it("waits in queued until started", () => {
    const { actor } = harness(async () => complete);
    expect(actor.getSnapshot().value).toBe("queued");
    expect(actor.getSnapshot().hasTag("queued")).toBe(true);
  });

  it("runs to completed with the evaluator's result", async () => {
    const { actor, announced } = harness(async () => complete);
    actor.send({ type: "task.start" });
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe("completed");
    expect(done.context.result).toEqual(complete);
    expect(announced).toEqual([{ event: "task.running", state: "running", message: "running" }]);
  });

  it("fails when the result is FAILED, keeping the error", async () => {
    const failed: TaskResult = {
      content: "",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "model_error", message: "boom" },
    };
    const { actor } = harness(async () => failed);
    actor.send({ type: "task.start" });
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe("failed");
    expect(done.context.result?.error).toMatchObject({ reason: "model_error" });
  });

  it("fails when the evaluation throws, naming the cause", async () => {
    const { actor } = harness(async () => {
      throw new Error("no responders on 'dirigent.evaluator.evaluate'");
    });
    actor.send({ type: "task.start" });
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe("failed");
    expect(done.context.result?.error?.message).toContain("no responders");
  });

  it("treats a CONTINUATION at the root as a failure", async () => {
    const { actor } = harness(async () => ({ content: "", status: "CONTINUATION", notes: {} }));
    actor.send({ type: "task.start" });
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe("failed");
    expect(done.context.result?.error?.message).toContain("no task is above it");
  });

  it("cancels while running and aborts the evaluation in flight", async () => {
    const { actor, signals } = harness(
      (signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")))),
    );
    actor.send({ type: "task.start" });
    expect(signals).toHaveLength(1);
    actor.send({ type: "task.cancel" });
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe("cancelled");
    expect(done.context.cancelled).toBe(true);
    expect(signals[0]?.aborted).toBe(true);
  });

  it("cancels from queued without evaluating", () => {
    const { actor, signals } = harness(async () => complete);
    actor.send({ type: "task.cancel" });
    expect(actor.getSnapshot().value).toBe("cancelled");
    expect(signals).toHaveLength(0);
  });

  it("moves through the CONTINUATION states on progress reports and announces each", () => {
    const { actor, announced } = harness(() => new Promise(() => undefined));
    actor.send({ type: "task.start" });
    const progress = (event: string) => actor.send({ type: "task.progress", taskId: "t1" as never, event });
    progress("continuation.evaluation");
    expect(actor.getSnapshot().value).toEqual({ running: "awaitingEvaluation" });
    expect(actor.getSnapshot().hasTag("awaiting_evaluation")).toBe(true);
    progress("model.turn");
    expect(actor.getSnapshot().value).toEqual({ running: "awaitingEvaluation" });
    progress("continuation.resumed");
    expect(actor.getSnapshot().value).toEqual({ running: "executing" });
    progress("continuation.subtask");
    expect(actor.getSnapshot().value).toEqual({ running: "awaitingSubtask" });
    expect(announced.map((a) => `${a.event}@${a.state}`)).toEqual([
      "task.running@running",
      "continuation.evaluation@awaiting_evaluation",
      "model.turn@awaiting_evaluation",
      "continuation.resumed@running",
      "continuation.subtask@awaiting_subtask",
    ]);
  });
});

describe("the state a status request reports", () => {
  it("is a stored final state over a task actor still running here, else the live state, else the stored one", () => {
    // Cancelled while its claim was pending: the cancel stored the final record; the Director running it has not seen it yet.
    expect(reportedState("running", "cancelled")).toBe("cancelled");
    expect(reportedState("running", "completed")).toBe("completed");
    expect(reportedState("running", "queued")).toBe("running");
    expect(reportedState("cancelled", "running")).toBe("cancelled");
    expect(reportedState(undefined, "queued")).toBe("queued");
    expect(reportedState(undefined, undefined)).toBeUndefined();
  });
});
