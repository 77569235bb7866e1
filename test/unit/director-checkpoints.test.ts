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
} from "../../machines/director/run.js";
import type { Scoped } from "../../machines/scoped.js";
import { StoreRefusedError, type TaskStore } from "../../actors/bus.js";
import type { ActorDeps, Logger } from "../../actors/deps.js";
import { claimTask, readTaskRecord } from "../../actors/director/records.js";
import { checkpointer, type RunningTask } from "../../actors/director/task.js";
import { taskMachine } from "../../machines/director/task.js";
import { MemoryTaskStore } from "../../runtime/in-process/store.js";
import type { TaskId, TaskRecord } from "../../protocol/index.js";
import { tid } from "../support/ids.js";

const at = "2026-01-01T00:00:00.000Z";
const queued: TaskRecord = { taskId: "t1" as TaskId, state: "queued", xml: "<task/>", inputs: {}, submittedAt: at, updatedAt: at };

/** A store whose compare-and-set writes fail with the errors queued in `failures`, one per write, first. */
class FlakyStore extends MemoryTaskStore {
  readonly failures: Error[] = [];
  override async update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined> {
    const failure = this.failures.shift();
    if (failure !== undefined) throw failure;
    return super.update(key, value, expectedRevision);
  }
}

/**
 * A claimed task whose heartbeats are sent to its run machine (as its Director's clock sends them) and whose
 * checkpoints are the real ones, written to an in-process store.
 */
async function heartbeating(store: FlakyStore) {
  const logged: string[] = [];
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (_, msg) => void logged.push(`warn: ${msg}`),
    error: (_, msg) => void logged.push(`error: ${msg}`),
  };
  const deps = { log, now: () => new Date(at) } as Pick<ActorDeps, "log" | "now">;
  const claimed = await claimTask(store as TaskStore, tid("t1"), "director-a", deps.now, { queued, intakeSeq: 1 });
  if (claimed.kind !== "claimed") throw new Error(`expected a claim, got ${claimed.kind}`);
  const signals: string[] = [];
  const item = {
    id: tid("t1"),
    data: new Uint8Array(),
    deliveries: 1,
    seq: 1,
    ack: async () => undefined,
    nak: () => undefined,
    working: () => void signals.push("working"),
  };
  const task: RunningTask = { claim: claimed.claim, item, seq: 1, lost: false, fresh: false, actor: undefined };
  const finishes: FinishInput[] = [];
  const checkpoints = checkpointer(deps as ActorDeps, store, task);
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise<ClaimOutput, Scoped>(async () => ({ kind: "claimed", pending: false, seq: 1 })),
      restore: fromPromise<RestoreOutput, Scoped>(async () => ({ kind: "ready" })),
      checkpoint: fromPromise<CheckpointOutput, Scoped>(() => checkpoints.checkpoint()),
      finish: fromPromise<FinishOutput, FinishInput>(async ({ input }) => (finishes.push(input), "written")),
      readOwner: fromPromise<{ final: boolean }, Scoped>(async () => ({ final: false })),
      // The task runs on for as long as the run lets it.
      task: fromPromise(() => new Promise<never>(() => undefined)) as unknown as LaunchedTask,
    },
    actions: {
      closeEvents: () => undefined,
      beat: () => item.working(),
      ack: () => undefined,
      nakLater: () => undefined,
      cancelOthers: () => undefined,
    },
  });
  const run = createActor(machine, { input: { taskId: tid("t1") } }).start();
  await waitFor(run, (s) => s.matches("running"));
  /** One heartbeat, and its checkpoint written (or failed). */
  const beat = async () => {
    run.send({ type: "heartbeat", seq: task.seq });
    await checkpoints.idle();
  };
  return { run, task, logged, signals, finishes, beat, checkpoints };
}

describe("the Director's heartbeat (run machine and checkpoints)", () => {
  it("a checkpoint that fails is written again at the next heartbeat; the task keeps running", async () => {
    const store = new FlakyStore();
    const { run, task, logged, signals, beat } = await heartbeating(store);
    task.seq = 4;
    store.failures.push(new Error("no responders: the store is restarting"));
    await beat();
    expect(logged).toEqual(["warn: checkpoint failed; retried at the next heartbeat"]);
    await waitFor(run, (s) => s.matches({ running: "waiting" }));
    expect(run.getSnapshot().context.checkpointed).toBe(1);
    await beat();
    await waitFor(run, (s) => s.matches({ running: "stored" }));
    expect(run.getSnapshot().context.checkpointed).toBe(4);
    expect((await readTaskRecord(store, tid("t1")))?.record.seq).toBe(4);
    // Progress is signalled on the delivery at every beat, written or not.
    expect(signals).toEqual(["working", "working"]);
  });

  it("a checkpoint the store refuses for good fails the task once, through the finish", async () => {
    const store = new FlakyStore();
    const { run, task, logged, finishes, beat } = await heartbeating(store);
    task.seq = 2;
    store.failures.push(new StoreRefusedError("value too large", "t1", 2_000_000));
    await beat();
    await waitFor(run, (s) => s.status === "done");
    expect(run.getSnapshot().value).toBe("settled");
    expect(finishes).toEqual([
      { failure: "the task's checkpoint (its state and template) (2000000 bytes) cannot be stored: value too large" },
    ]);
    expect(logged).toEqual(["error: checkpoint refused by the store; the task fails"]);
  });

  it("writes no checkpoint of a task its run stopped: a stopped machine is no state to resume from", async () => {
    const store = new FlakyStore();
    const { task, checkpoints } = await heartbeating(store);
    const actor = createActor(taskMachine, { input: { taskId: tid("t1"), xml: "<task/>", inputs: {} } }).start();
    task.actor = actor;
    task.seq = 2;
    await expect(checkpoints.checkpoint()).resolves.toEqual({ kind: "written", seq: 2 });
    actor.stop();
    task.seq = 3;
    await expect(checkpoints.checkpoint()).resolves.toEqual({ kind: "skipped" });
    const stored = (await readTaskRecord(store, tid("t1")))?.record;
    expect(stored?.seq).toBe(2);
    expect(stored?.machine?.snapshot).toMatchObject({ status: "active" });
  });

  it("a checkpoint that finds the claim taken over stops the run as lost", async () => {
    const store = new FlakyStore();
    const { run, task, beat } = await heartbeating(store);
    // Another Director takes the claim over.
    await claimTask(store, tid("t1"), "director-b", () => new Date(at), { intakeSeq: 1 });
    task.seq = 3;
    await beat();
    await waitFor(run, (s) => s.status === "done");
    expect(run.getSnapshot().value).toBe("lost");
    expect(task.lost).toBe(true);
  });
});
