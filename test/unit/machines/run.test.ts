import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import {
  runMachine,
  type CheckpointOutput,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type LaunchedTask,
  type RestoreOutput,
  type RunOutcome,
} from "../../../machines/director/run.js";
import { tid } from "../../support/ids.js";

/** A promise settled from the test. */
function deferred<T>() {
  let resolve: (value: T) => void = () => undefined;
  let reject: (err: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

interface Fakes {
  claim?: () => Promise<ClaimOutput>;
  tellPreviousOwner?: () => Promise<void>;
  restore?: () => Promise<RestoreOutput>;
  checkpoint?: () => Promise<CheckpointOutput>;
  finish?: (input: FinishInput) => Promise<FinishOutput>;
  flush?: () => Promise<void>;
  readOwner?: () => Promise<{ final: boolean }>;
  /** A first delivery's task created (`startFresh`), or why not; `null`: no answer (the test sends it). */
  startFresh?: (() => RestoreOutput) | null;
}

/**
 * The run machine with fake effects that log what they are asked to do. Its task is a fake too: logged `startTask`
 * when the run invokes it and `stopTask` when the run stops it; ended from the test (`endTask`, `failTask`).
 */
function harness(fakes: Fakes = {}, draining = false, first = false) {
  const effects: string[] = [];
  const task = deferred<void>();
  const finishes: FinishInput[] = [];
  const outcomes: RunOutcome[] = [];
  const log = (name: string) => () => void effects.push(name);
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise(
        async () => (effects.push("claim"), (fakes.claim ?? (async () => ({ kind: "claimed", pending: false, seq: 1 }) as const))()),
      ),
      tellPreviousOwner: fromPromise(
        async () => (effects.push("tellPreviousOwner"), (fakes.tellPreviousOwner ?? (async () => undefined))()),
      ),
      restore: fromPromise(async () => (effects.push("restore"), (fakes.restore ?? (async () => ({ kind: "ready" }) as const))())),
      // By default a checkpoint stores the seq the run last heard of.
      checkpoint: fromPromise(
        async () => (effects.push("checkpoint"), (fakes.checkpoint ?? (async () => ({ kind: "written", seq: written() }) as const))()),
      ),
      finish: fromPromise(async ({ input }: { input: FinishInput }) => {
        effects.push("finish");
        finishes.push(input);
        return (fakes.finish ?? (async () => "written" as const))(input);
      }),
      flush: fromPromise(async () => (effects.push("flush"), (fakes.flush ?? (async () => undefined))())),
      readOwner: fromPromise(async () => (effects.push("readOwner"), (fakes.readOwner ?? (async () => ({ final: false })))())),
      task: fromPromise(({ signal }) => {
        effects.push("startTask");
        signal.addEventListener("abort", () => effects.push("stopTask"));
        return task.promise;
      }) as unknown as LaunchedTask,
    },
    actions: {
      // Answered at once, as the Director's shell answers: the pending claim taken, the task created (or not).
      startFresh: () => {
        effects.push("startFresh");
        if (fakes.startFresh !== null)
          actor.send({ type: "task.created", output: (fakes.startFresh ?? (() => ({ kind: "ready" }) as const))(), seq: 1 });
      },
      closeEvents: log("closeEvents"),
      beat: log("beat"),
      ack: log("ack"),
      nak: log("nak"),
      nakLater: log("nakLater"),
      cancelOthers: log("cancelOthers"),
      report: (_, { outcome }) => void outcomes.push(outcome),
    },
  });
  const actor = createActor(machine, {
    input: { taskId: tid("t1"), draining, first },
  });
  // An action that throws ends the actor in error: heard here, as the Director's shell hears it (not rethrown).
  const written = () => actor.getSnapshot().context.seq;
  actor.subscribe({ error: () => undefined });
  actor.start();
  const settledIn = async (outcome: RunOutcome) => {
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe(outcome);
    expect(outcomes).toEqual([outcome]);
  };
  /** The task's machine ends: the run goes on to finish it. */
  const endTask = async () => {
    task.resolve();
    await waitFor(actor, (s) => !s.matches("running"));
  };
  const failTask = async (error: unknown) => {
    task.reject(error);
    await waitFor(actor, (s) => !s.matches("running"));
  };
  return { actor, effects, finishes, settledIn, endTask, failTask };
}

/** Lets the fake effects' promises settle. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("run protocol machine", () => {
  it("claims, restores, runs, finishes and acks: the happy path", async () => {
    const { actor, effects, finishes, settledIn, endTask } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    await endTask();
    await settledIn("settled");
    expect(effects).toEqual(["claim", "restore", "startTask", "checkpoint", "finish", "ack"]);
    expect(finishes).toEqual([{}]);
  });

  it("runs a first delivery at once under a pending claim: nothing read, no actor invoked but its task", async () => {
    const { actor, effects, settledIn, endTask } = harness({}, false, true);
    expect(actor.getSnapshot().value).toEqual({ running: "stored" });
    expect(Object.keys(actor.getSnapshot().children)).toEqual(["task"]);
    expect(effects).toEqual(["startFresh", "startTask"]);
    expect(actor.getSnapshot().context.pending).toBe(true);
    // Its claim is pending: a change does not store it before it is due.
    actor.send({ type: "task.changed", seq: 2 });
    expect(effects).not.toContain("checkpoint");
    // Stored by the first checkpoint once due.
    // The Director's clock says the pending claim's delay passed.
    actor.send({ type: "claim.due" });
    await endTask();
    await settledIn("settled");
    expect(effects).toEqual(["startFresh", "startTask", "checkpoint", "finish", "ack"]);
  });

  it("a first delivery whose task cannot be created fails it once, through the finish; one while draining is handed back", async () => {
    const refused = harness({ startFresh: () => ({ kind: "refused", message: "no such machine" }) }, false, true);
    await refused.settledIn("settled");
    expect(refused.effects).toEqual(["startFresh", "finish", "ack"]);
    expect(refused.finishes).toEqual([{ failure: "cannot resume the task: no such machine" }]);
    const draining = harness({}, true, true);
    await draining.settledIn("handedBack");
    expect(draining.effects).toEqual(["startFresh", "flush", "nak"]);
  });

  it("a first delivery whose start failed unexpectedly goes back to the queue after a pause", async () => {
    const { actor, effects, settledIn } = harness({ startFresh: null }, false, true);
    expect(actor.getSnapshot().value).toBe("starting");
    actor.send({ type: "effect.failed", error: new Error("boom") });
    await settledIn("handedBack");
    expect(actor.getSnapshot().context.error).toBe("boom");
    expect(effects).toEqual(["startFresh", "nakLater"]);
  });

  it("a pending claim granted by reading the record (a delivery that may not be the first) runs the same", async () => {
    const { actor, effects, settledIn, endTask } = harness({ claim: async () => ({ kind: "claimed", pending: true, seq: 1 }) });
    await waitFor(actor, (s) => s.matches("running"));
    expect(actor.getSnapshot().context.pending).toBe(true);
    actor.send({ type: "claim.due" });
    await endTask();
    await settledIn("settled");
    expect(effects).toEqual(["claim", "restore", "startTask", "checkpoint", "finish", "ack"]);
  });

  it("beats at each of its Director's heartbeats while running, and stores a pending claim once it is due", async () => {
    const { actor, effects, endTask } = harness({ claim: async () => ({ kind: "claimed", pending: true, seq: 1 }) });
    await waitFor(actor, (s) => s.matches("running"));
    // The Director's clock says the pending claim's delay passed.
    actor.send({ type: "claim.due" });
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(1);
    expect(effects).not.toContain("beat");
    await waitFor(actor, (s) => s.matches({ running: "stored" }));
    expect(actor.getSnapshot().context).toMatchObject({ pending: false, checkpointed: 1 });
    // Nothing published since: the beats signal progress and write nothing.
    for (let i = 0; i < 3; i++) actor.send({ type: "heartbeat", seq: 1 });
    expect(effects.filter((e) => e === "beat")).toHaveLength(3);
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(1);
    // An event published since the last checkpoint: the next beat writes one.
    actor.send({ type: "heartbeat", seq: 3 });
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(2);
    await waitFor(actor, (s) => s.matches({ running: "stored" }));
    expect(actor.getSnapshot().context.checkpointed).toBe(3);
    await endTask();
    await waitFor(actor, (s) => s.status === "done");
    // No beat after the run left `running`.
    actor.send({ type: "heartbeat", seq: 4 });
    expect(effects.filter((e) => e === "beat")).toHaveLength(4);
  });

  it("does not store a claim early that was stored when it was granted", async () => {
    const { actor, effects } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    // The Director's clock says the pending claim's delay passed.
    actor.send({ type: "claim.due" });
    actor.send({ type: "heartbeat", seq: 1 });
    expect(effects).not.toContain("checkpoint");
  });

  it("a claim lost during finish publishes nothing more, and acks only once the new owner has finished", async () => {
    const finish = deferred<FinishOutput>();
    const { actor, effects, settledIn, endTask } = harness({ finish: () => finish.promise, readOwner: async () => ({ final: true }) });
    await waitFor(actor, (s) => s.matches("running"));
    await endTask();
    await waitFor(actor, (s) => s.matches("finishing"));
    // A heartbeat while the final write is under way writes no checkpoint (the finish decides), but keeps the delivery
    // in progress: the result waits for the task's events, which an election can hold up past the ack wait.
    actor.send({ type: "heartbeat", seq: 5 });
    expect(actor.getSnapshot().value).toBe("finishing");
    finish.resolve("lost");
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "startTask", "finish", "beat", "readOwner", "ack"]);
  });

  it("a claim lost during finish to an owner still running it leaves the delivery unacked", async () => {
    const { settledIn, effects, actor, endTask } = harness({ finish: async () => "lost", readOwner: async () => ({ final: false }) });
    await waitFor(actor, (s) => s.matches("running"));
    await endTask();
    await settledIn("lost");
    expect(effects).not.toContain("ack");
    expect(effects).not.toContain("nak");
  });

  it("a checkpoint that finds the claim lost stops the task without finishing it", async () => {
    const { actor, effects, settledIn } = harness({ checkpoint: async () => ({ kind: "lost" }) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "startTask", "checkpoint", "closeEvents", "stopTask", "readOwner"]);
  });

  it("writes one checkpoint at a time: a change while one is written is written after it", async () => {
    const first = deferred<CheckpointOutput>();
    const outputs = [first.promise, Promise.resolve({ kind: "written", seq: 3 } as const)];
    const { actor, effects } = harness({ checkpoint: () => outputs.shift() ?? Promise.reject(new Error("one write too many")) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    actor.send({ type: "task.changed", seq: 3 });
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(1);
    first.resolve({ kind: "written", seq: 2 });
    await waitFor(actor, (s) => s.context.checkpointed === 3);
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(2);
    expect(actor.getSnapshot().matches({ running: "stored" })).toBe(true);
  });

  it("a checkpoint of a task that ended meanwhile is skipped without writing again", async () => {
    const { actor, effects } = harness({ checkpoint: async () => ({ kind: "skipped" }) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    await waitFor(actor, (s) => s.matches({ running: "stored" }));
    await settle();
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(1);
  });

  it("a claim that replaced another Director's tells that Director before anything is restored or published", async () => {
    const told = deferred<void>();
    const { actor, effects, settledIn, endTask } = harness({
      claim: async () => ({ kind: "claimed", pending: false, takenOver: true, seq: 1 }),
      tellPreviousOwner: () => told.promise,
    });
    await waitFor(actor, (s) => s.matches("telling"));
    expect(effects).toEqual(["claim", "tellPreviousOwner"]);
    // The answer can take up to 10 s, longer than an ack wait: the delivery is kept in progress meanwhile.
    actor.send({ type: "heartbeat", seq: 1 });
    expect(effects).toEqual(["claim", "tellPreviousOwner", "beat"]);
    // Unanswered (the previous owner is gone): the run goes on all the same.
    told.reject(new Error("no responders"));
    await waitFor(actor, (s) => s.matches("running"));
    await endTask();
    await settledIn("settled");
    expect(effects).toEqual(["claim", "tellPreviousOwner", "beat", "restore", "startTask", "finish", "ack"]);
  });

  it("a task resumed from its record goes on from the seq its restore found stored, and checkpoints from there", async () => {
    // The record counted 7 events; the events stream holds 5 (the previous owner never stored the last two).
    const { actor, effects } = harness({
      claim: async () => ({ kind: "claimed", pending: false, takenOver: true, seq: 7 }),
      restore: async () => ({ kind: "ready", seq: 5 }),
    });
    await waitFor(actor, (s) => s.matches("running"));
    expect(actor.getSnapshot().context).toMatchObject({ seq: 5, checkpointed: 5 });
    // Its next event (6) is a change to checkpoint, though below the record's count.
    actor.send({ type: "task.changed", seq: 6 });
    await waitFor(actor, (s) => s.matches({ running: "stored" }) && effects.includes("checkpoint"));
    expect(actor.getSnapshot().context.checkpointed).toBe(6);
  });

  it("told that another Director took the task over, closes its events and stops the task without finishing it", async () => {
    const { actor, effects, settledIn } = harness({ readOwner: async () => ({ final: true }) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "claim.superseded" });
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "startTask", "closeEvents", "stopTask", "readOwner", "ack"]);
  });

  it("told so while restoring, closes its events at once and never starts the task", async () => {
    const restore = deferred<RestoreOutput>();
    const { actor, effects, settledIn } = harness({ restore: () => restore.promise });
    await waitFor(actor, (s) => s.matches("restoring"));
    actor.send({ type: "claim.superseded" });
    expect(effects).toEqual(["claim", "restore", "closeEvents"]);
    restore.resolve({ kind: "ready" });
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "closeEvents", "readOwner"]);
  });

  it("a drain during restore hands the task back once restored, without starting it", async () => {
    const restore = deferred<RestoreOutput>();
    const { actor, effects, settledIn } = harness({ restore: () => restore.promise });
    await waitFor(actor, (s) => s.matches("restoring"));
    actor.send({ type: "drain" });
    restore.resolve({ kind: "ready" });
    await settledIn("handedBack");
    expect(effects).toEqual(["claim", "restore", "flush", "nak"]);
  });

  it("a drain while running writes a last checkpoint of the running task, then naks at once and stops it", async () => {
    const flush = deferred<void>();
    const { actor, effects, settledIn } = harness({ flush: () => flush.promise });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "drain" });
    expect(actor.getSnapshot().value).toEqual({ running: "handingBack" });
    // The checkpoint is of the task as it runs: it is stopped only once written.
    expect(effects).not.toContain("stopTask");
    flush.resolve();
    await settledIn("handedBack");
    expect(effects).toEqual(["claim", "restore", "startTask", "flush", "nak", "stopTask"]);
  });

  it("a task that ends while its last checkpoint is written is finished, not handed back", async () => {
    const flush = deferred<void>();
    const { actor, effects, settledIn, endTask } = harness({ flush: () => flush.promise });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "drain" });
    await endTask();
    flush.resolve();
    await settledIn("settled");
    expect(effects).toEqual(["claim", "restore", "startTask", "flush", "finish", "ack"]);
  });

  it("a task machine that fails ends the run's running, through the finish", async () => {
    const { actor, effects, finishes, settledIn, failTask } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    await failTask(new Error("a guard threw"));
    await settledIn("settled");
    // The finish reads the failure from the task's actor (the shell's): nothing is passed to it.
    expect(finishes).toEqual([{}]);
    expect(effects).toEqual(["claim", "restore", "startTask", "finish", "ack"]);
  });

  it("an effect that failed while the task runs stops it and hands the delivery back after a pause", async () => {
    const { actor, effects, settledIn } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "effect.failed", error: new Error("connection closed") });
    await settledIn("handedBack");
    expect(actor.getSnapshot().context.error).toBe("connection closed");
    expect(effects).toEqual(["claim", "restore", "startTask", "nakLater", "stopTask"]);
  });

  it("a drain while finishing lets the finish complete", async () => {
    const finish = deferred<FinishOutput>();
    const { actor, settledIn, endTask } = harness({ finish: () => finish.promise });
    await waitFor(actor, (s) => s.matches("running"));
    await endTask();
    actor.send({ type: "drain" });
    finish.resolve("written");
    await settledIn("settled");
  });

  it("a checkpoint refused for good fails the task through the normal finish, then cancels its work elsewhere", async () => {
    const { actor, effects, finishes, settledIn } = harness({
      checkpoint: async () => ({ kind: "refused", message: "the task's checkpoint (2000000 bytes) cannot be stored" }),
    });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    await settledIn("settled");
    expect(finishes).toEqual([{ failure: "the task's checkpoint (2000000 bytes) cannot be stored" }]);
    expect(effects).toEqual(["claim", "restore", "startTask", "checkpoint", "stopTask", "finish", "ack", "cancelOthers"]);
  });

  it("a heartbeat whose write failed keeps the task running: the next beat writes again", async () => {
    // A transient checkpoint failure is the shell's to log; the machine waits for the next beat, not a moment less.
    const outputs: CheckpointOutput[] = [{ kind: "failed" }, { kind: "written", seq: 2 }];
    const { actor, effects } = harness({ checkpoint: async () => outputs.shift() ?? { kind: "failed" } });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed", seq: 2 });
    await waitFor(actor, (s) => s.matches({ running: "waiting" }));
    await settle();
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(1);
    actor.send({ type: "heartbeat", seq: 2 });
    await waitFor(actor, (s) => s.matches({ running: "stored" }));
    expect(actor.getSnapshot().context.checkpointed).toBe(2);
    expect(effects.filter((e) => e === "checkpoint")).toHaveLength(2);
    expect(effects.filter((e) => e === "beat")).toHaveLength(1);
  });

  it("an effect that fails hands the delivery back after a pause", async () => {
    const { actor, effects, settledIn, endTask } = harness({ finish: async () => Promise.reject(new Error("store unreachable")) });
    await waitFor(actor, (s) => s.matches("running"));
    await endTask();
    await settledIn("handedBack");
    expect(actor.getSnapshot().context.error).toBe("store unreachable");
    expect(effects).toEqual(["claim", "restore", "startTask", "finish", "nakLater"]);
  });

  it("a snapshot that cannot be restored fails the task once, through the finish", async () => {
    const { finishes, settledIn } = harness({
      restore: async () => ({ kind: "refused", message: "stored snapshot is of task machine v9" }),
    });
    await settledIn("settled");
    expect(finishes).toEqual([{ failure: "cannot resume the task: stored snapshot is of task machine v9" }]);
  });

  it.each([
    [{ kind: "contended" } as const, ["claim", "nakLater"]],
    [{ kind: "done" } as const, ["claim", "ack"]],
    [{ kind: "joined" } as const, ["claim"]],
  ])("a claim not granted (%o) runs nothing", async (output, expected) => {
    const { effects, settledIn } = harness({ claim: async () => output });
    await settledIn("refused");
    await settle();
    expect(effects).toEqual(expected);
  });
});
