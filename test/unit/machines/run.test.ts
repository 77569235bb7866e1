import { describe, expect, it } from "vitest";
import { createActor, fromPromise, SimulatedClock, waitFor } from "xstate";
import {
  runMachine,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type RestoreOutput,
  type RunOutcome,
} from "../../../machines/director/run.js";

/** A promise settled from the test. */
function deferred<T>() {
  let resolve: (value: T) => void = () => undefined;
  let reject: (err: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const PENDING_CLAIM_MS = 400;

interface Fakes {
  claim?: () => Promise<ClaimOutput>;
  tellPreviousOwner?: () => Promise<void>;
  restore?: () => Promise<RestoreOutput>;
  finish?: (input: FinishInput) => Promise<FinishOutput>;
  flush?: () => Promise<void>;
  readOwner?: () => Promise<{ final: boolean }>;
}

/** The run machine with fake effects that log what they are asked to do, on a simulated clock. */
function harness(fakes: Fakes = {}, draining = false) {
  const clock = new SimulatedClock();
  const effects: string[] = [];
  const finishes: FinishInput[] = [];
  const outcomes: RunOutcome[] = [];
  const log = (name: string) => () => void effects.push(name);
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise(
        async () => (effects.push("claim"), (fakes.claim ?? (async () => ({ kind: "claimed", pending: false }) as const))()),
      ),
      tellPreviousOwner: fromPromise(
        async () => (effects.push("tellPreviousOwner"), (fakes.tellPreviousOwner ?? (async () => undefined))()),
      ),
      restore: fromPromise(async () => (effects.push("restore"), (fakes.restore ?? (async () => ({ kind: "ready" }) as const))())),
      finish: fromPromise(async ({ input }: { input: FinishInput }) => {
        effects.push("finish");
        finishes.push(input);
        return (fakes.finish ?? (async () => "written" as const))(input);
      }),
      flush: fromPromise(async () => (effects.push("flush"), (fakes.flush ?? (async () => undefined))())),
      readOwner: fromPromise(async () => (effects.push("readOwner"), (fakes.readOwner ?? (async () => ({ final: false })))())),
    },
    actions: {
      startTask: log("startTask"),
      stopTask: log("stopTask"),
      closeEvents: log("closeEvents"),
      beat: log("beat"),
      checkpoint: log("checkpoint"),
      dueClaim: log("dueClaim"),
      ack: log("ack"),
      nak: log("nak"),
      nakLater: log("nakLater"),
      cancelOthers: log("cancelOthers"),
      report: (_, { outcome }) => void outcomes.push(outcome),
    },
  });
  const actor = createActor(machine, {
    clock,
    input: { taskId: "t1", pendingClaimMs: PENDING_CLAIM_MS, draining },
  });
  // An action that throws ends the actor in error: heard here, as the Director's shell hears it (not rethrown).
  actor.subscribe({ error: () => undefined });
  actor.start();
  const settledIn = async (outcome: RunOutcome) => {
    const done = await waitFor(actor, (s) => s.status === "done");
    expect(done.value).toBe(outcome);
    expect(outcomes).toEqual([outcome]);
  };
  return { actor, clock, effects, finishes, settledIn };
}

/** Lets the fake effects' promises settle. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("run protocol machine", () => {
  it("claims, restores, runs, finishes and acks: the happy path", async () => {
    const { actor, effects, finishes, settledIn } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.changed" });
    actor.send({ type: "task.done" });
    await settledIn("settled");
    expect(effects).toEqual(["claim", "restore", "startTask", "checkpoint", "finish", "ack"]);
    expect(finishes).toEqual([{}]);
  });

  it("runs a first delivery under a pending claim, claimed and restored through the same actors as any other", async () => {
    const { actor, clock, effects, settledIn } = harness({ claim: async () => ({ kind: "claimed", pending: true }) });
    await waitFor(actor, (s) => s.matches("running"));
    expect(actor.getSnapshot().context.pending).toBe(true);
    // Its claim is pending: stored by the first checkpoint once due.
    clock.increment(PENDING_CLAIM_MS);
    actor.send({ type: "task.done" });
    await settledIn("settled");
    expect(effects).toEqual(["claim", "restore", "startTask", "dueClaim", "finish", "ack"]);
  });

  it("beats at each of its Director's heartbeats while running, and stores a pending claim once it is due", async () => {
    const { actor, clock, effects } = harness({ claim: async () => ({ kind: "claimed", pending: true }) });
    await waitFor(actor, (s) => s.matches("running"));
    clock.increment(PENDING_CLAIM_MS);
    expect(effects.filter((e) => e === "dueClaim")).toHaveLength(1);
    expect(effects).not.toContain("beat");
    for (let i = 0; i < 3; i++) actor.send({ type: "heartbeat" });
    expect(effects.filter((e) => e === "beat")).toHaveLength(3);
    expect(effects.filter((e) => e === "dueClaim")).toHaveLength(1);
    actor.send({ type: "task.done" });
    await waitFor(actor, (s) => s.status === "done");
    // No beat after the run left `running`.
    actor.send({ type: "heartbeat" });
    expect(effects.filter((e) => e === "beat")).toHaveLength(3);
  });

  it("does not store a claim early that was stored when it was granted", async () => {
    const { actor, clock, effects } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    clock.increment(PENDING_CLAIM_MS);
    actor.send({ type: "heartbeat" });
    expect(effects).not.toContain("dueClaim");
  });

  it("a claim lost during finish publishes nothing more, and acks only once the new owner has finished", async () => {
    const finish = deferred<FinishOutput>();
    const { actor, effects, settledIn } = harness({ finish: () => finish.promise, readOwner: async () => ({ final: true }) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.done" });
    await waitFor(actor, (s) => s.matches("finishing"));
    // The heartbeat found the claim gone while the final write was under way: the finish decides.
    actor.send({ type: "claim.lost" });
    expect(actor.getSnapshot().value).toBe("finishing");
    finish.resolve("lost");
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "startTask", "finish", "readOwner", "ack"]);
  });

  it("a claim lost during finish to an owner still running it leaves the delivery unacked", async () => {
    const { settledIn, effects, actor } = harness({ finish: async () => "lost", readOwner: async () => ({ final: false }) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.done" });
    await settledIn("lost");
    expect(effects).not.toContain("ack");
    expect(effects).not.toContain("nak");
  });

  it("a claim lost while running stops the task without finishing it", async () => {
    const { actor, effects, settledIn } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "claim.lost" });
    await settledIn("lost");
    expect(effects).toEqual(["claim", "restore", "startTask", "closeEvents", "stopTask", "readOwner"]);
  });

  it("a claim that replaced another Director's tells that Director before anything is restored or published", async () => {
    const told = deferred<void>();
    const { actor, effects, settledIn } = harness({
      claim: async () => ({ kind: "claimed", pending: false, takenOver: true }),
      tellPreviousOwner: () => told.promise,
    });
    await waitFor(actor, (s) => s.matches("telling"));
    expect(effects).toEqual(["claim", "tellPreviousOwner"]);
    // Unanswered (the previous owner is gone): the run goes on all the same.
    told.reject(new Error("no responders"));
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.done" });
    await settledIn("settled");
    expect(effects).toEqual(["claim", "tellPreviousOwner", "restore", "startTask", "finish", "ack"]);
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
    expect(effects).toEqual(["claim", "restore", "closeEvents", "stopTask", "readOwner"]);
  });

  it("a drain during restore hands the task back once restored, without starting it", async () => {
    const restore = deferred<RestoreOutput>();
    const { actor, effects, settledIn } = harness({ restore: () => restore.promise });
    await waitFor(actor, (s) => s.matches("restoring"));
    actor.send({ type: "drain" });
    restore.resolve({ kind: "ready" });
    await settledIn("handedBack");
    expect(effects).toEqual(["claim", "restore", "flush", "stopTask", "nak"]);
  });

  it("a drain while running writes a last checkpoint, then naks at once", async () => {
    const { actor, effects, settledIn } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "drain" });
    await settledIn("handedBack");
    expect(effects).toEqual(["claim", "restore", "startTask", "flush", "stopTask", "nak"]);
  });

  it("a drain while finishing lets the finish complete", async () => {
    const finish = deferred<FinishOutput>();
    const { actor, settledIn } = harness({ finish: () => finish.promise });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.done" });
    actor.send({ type: "drain" });
    finish.resolve("written");
    await settledIn("settled");
  });

  it("a checkpoint refused for good fails the task through the normal finish, then cancels its work elsewhere", async () => {
    const { actor, effects, finishes, settledIn } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "checkpoint.refused", message: "the task's checkpoint (2000000 bytes) cannot be stored" });
    await settledIn("settled");
    expect(finishes).toEqual([{ failure: "the task's checkpoint (2000000 bytes) cannot be stored" }]);
    expect(effects).toEqual(["claim", "restore", "startTask", "stopTask", "finish", "ack", "cancelOthers"]);
  });

  it("a heartbeat whose write failed keeps the task running: the next beat writes again", async () => {
    // A transient checkpoint failure is the shell's to log; the machine keeps beating.
    const { actor, effects } = harness();
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "heartbeat" });
    actor.send({ type: "heartbeat" });
    expect(actor.getSnapshot().matches("running")).toBe(true);
    expect(effects.filter((e) => e === "beat")).toHaveLength(2);
  });

  it("an effect that fails hands the delivery back after a pause", async () => {
    const { actor, effects, settledIn } = harness({ finish: async () => Promise.reject(new Error("store unreachable")) });
    await waitFor(actor, (s) => s.matches("running"));
    actor.send({ type: "task.done" });
    await settledIn("handedBack");
    expect(actor.getSnapshot().context.error).toBe("store unreachable");
    expect(effects.slice(-2)).toEqual(["stopTask", "nakLater"]);
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
