/**
 * The Director's run actors as actors/director/run-actors.ts provides them: the task machine is the run's invoked
 * child, started from its input or from a stored snapshot, and an action that throws hands the delivery back and stops
 * the task instead of leaving a run in error with its task running.
 */
import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor, type AnyActorRef, type Snapshot } from "xstate";
import { runActors, type RunEffects } from "../../actors/director/run-actors.js";
import { taskActors, type TaskLaunch } from "../../actors/director/task.js";
import { taskMachine, type TaskInput } from "../../machines/director/task.js";
import type { TaskResult } from "../../protocol/index.js";
import { tid } from "../support/ids.js";

const taskId = tid("t1");
const input: TaskInput = { taskId, xml: "<task/>", inputs: {} };
const never = () => new Promise<never>(() => undefined);

/** A delivery's effects that log what the run asks of them; `overrides` replaces some. */
function effectsOf(launch: TaskLaunch, overrides: Partial<RunEffects> = {}) {
  const calls: string[] = [];
  /** The actors `launch` and `launched` were given. */
  const actors: unknown[] = [];
  const log = (name: string) => () => void calls.push(name);
  const effects: RunEffects = {
    claim: async () => ({ kind: "claimed", pending: false, seq: 1 }),
    tellPreviousOwner: async () => undefined,
    startFresh: log("startFresh"),
    restore: async () => ({ kind: "ready" }),
    launch: (actor) => (calls.push("launch"), actors.push(actor), launch),
    launched: (actor) => void (calls.push("launched"), actors.push(actor)),
    checkpoint: async () => ({ kind: "written", seq: 1 }),
    finish: async () => "written",
    flush: async () => undefined,
    readOwner: async () => ({ final: false }),
    closeEvents: log("closeEvents"),
    beat: log("beat"),
    ack: log("ack"),
    nak: log("nak"),
    nakLater: log("nakLater"),
    cancelOthers: log("cancelOthers"),
    report: (_, outcome) => void calls.push(`report:${outcome}`),
    ...overrides,
  };
  return { effects, calls, actors };
}

/** A Director's run actors, its tasks' evaluations never answering; one run created and started under `effects`. */
async function running(effects: RunEffects) {
  const tasks = taskActors();
  const evaluations: TaskInput[] = [];
  tasks.register(taskId, { evaluate: (asked) => (evaluations.push(asked), never()), announce: () => undefined });
  const run = runActors(tasks).create(effects, { input: { taskId } }).actor.start();
  await waitFor(run, (s) => s.matches("running"));
  const task: AnyActorRef | undefined = run.getSnapshot().children.task;
  if (task === undefined) throw new Error("the run invoked no task");
  return { run, task, evaluations };
}

describe("the Director's run actors", () => {
  it("invoke the task as the run's child, in the run's actor system, from its input", async () => {
    const { effects, calls, actors } = effectsOf({ input });
    const { run, task, evaluations } = await running(effects);
    expect(actors).toHaveLength(2);
    for (const actor of actors) expect(actor).toBe(task);
    expect(evaluations).toEqual([]);
    expect(task.system).toBe(run.system);
    expect(task.getSnapshot()).toMatchObject({ status: "active", value: "queued", context: { taskId } });
    expect(calls).toEqual(["launch", "launched"]);
    task.send({ type: "task.start" });
    expect(task.getSnapshot().value).toEqual({ running: "executing" });
    expect(evaluations).toEqual([input]);
  });

  it("start a task taken over from its stored snapshot, its evaluation invoked again", async () => {
    const before = createActor(
      taskMachine.provide({ actors: { evaluate: fromPromise<TaskResult, TaskInput>(never) }, actions: { announce: () => undefined } }),
      { input },
    ).start();
    before.send({ type: "task.start" });
    const stored = before.getPersistedSnapshot() as Snapshot<unknown>;
    before.stop();
    const { effects } = effectsOf({ input, snapshot: stored });
    const { task, evaluations } = await running(effects);
    expect(task.getSnapshot()).toMatchObject({ status: "active", value: { running: "executing" } });
    expect(Object.keys(task.getSnapshot().children)).toEqual(["evaluate"]);
    // Through this Director's effects, without a task.start: it was running when stored.
    expect(evaluations).toEqual([input]);
  });

  it("hand the delivery back and stop the task when an action throws, rather than leave a run in error", async () => {
    const { effects, calls } = effectsOf(
      { input },
      {
        beat: () => {
          throw new Error("connection closed");
        },
      },
    );
    const { run, task } = await running(effects);
    run.send({ type: "heartbeat", seq: 1 });
    await waitFor(run, (s) => s.status === "done");
    expect(run.getSnapshot()).toMatchObject({ value: "handedBack", context: { error: "connection closed" } });
    expect(task.getSnapshot().status).toBe("stopped");
    expect(calls.slice(-2)).toEqual(["nakLater", "report:handedBack"]);
  });
});
