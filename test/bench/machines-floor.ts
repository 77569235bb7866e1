/**
 * The floors in XState alone, per task: no NATS, no JSON, no model.
 * - Workloads 1–2: the three machines one trivial task runs (the Director's task machine, the Evaluator's evaluation
 *   of an atomic node, the Handler's session), created, started and run to their end with effects that answer at once.
 * - Workload 3 (the live heap of a task in flight): the actors a trivial task keeps while its model call is out, held
 *   there with effects that never answer: each role's machine actors as the roles make them, and the effect each
 *   waits on (an invoked promise actor).
 */
import { assign, createActor, fromPromise, toPromise, type AnyActorRef } from "xstate";
import { START } from "../../machines/invoke-events.js";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import { rootEnv, type Env } from "../../machines/language/env.js";
import { evaluationMachine } from "../../machines/evaluator/evaluation.js";
import {
  handlerSessionMachine,
  measured,
  type CallModelInput,
  type ModelReply,
  type RunToolsInput,
  type ToolResults,
} from "../../machines/handler/session.js";
import { taskMachine, type TaskInput } from "../../machines/director/task.js";
import { runMachine } from "../../machines/director/run.js";
import { launchedTask } from "../../actors/director/run-actors.js";
import type { SessionCheckpoint, TaskResult } from "../../protocol/index.js";
import { tid } from "../support/ids.js";

const RESULT: TaskResult = { content: "ok", status: "COMPLETE", notes: {} };
const REPLY: ModelReply = {
  content: "ok",
  toolCalls: [],
  usage: { promptTokens: 12, completionTokens: 1 },
  model: "stub",
  finishReason: "stop",
};

const task = taskMachine.provide({ actors: { evaluate: fromPromise(async () => RESULT) }, actions: { announce: () => undefined } });
const evaluation = evaluationMachine.provide({
  // Its inputs bound at once, as for every task without a nested task among its inputs.
  actions: { progress: () => undefined, bindNow: () => undefined },
  actors: {
    runAtomic: fromPromise<SuspendedResult, { path: string; env: Env }>(async () => RESULT),
  },
});
const session = handlerSessionMachine.provide({
  actors: {
    callModel: fromPromise<ModelReply, CallModelInput>(async () => REPLY),
    recordTurn: fromPromise<void, SessionCheckpoint>(async () => undefined),
    runTools: fromPromise<ToolResults, RunToolsInput>(async () => ({ messages: [], malformed: 0 })),
  },
  actions: {
    turnCompleted: () => undefined,
    contextWarning: () => undefined,
    measure: assign(({ context }) => measured(context, () => ({ tokens: 40, exact: true }))),
  },
});

const SESSION_INPUT = {
  system: "You are a careful assistant working on one task. Answer with the result only.",
  prompt: "Answer with the word ok.",
  model: "stub",
  maxTurns: 10,
  contextLimit: 102_400,
  warningThreshold: 0.8,
  maxMalformedToolCalls: 3,
};

/** Runs the three machines of one trivial task, one after the other. */
async function oneTask(i: number): Promise<void> {
  const t = createActor(task, { input: { taskId: tid(`t-${i}`), xml: "<task/>", inputs: {} } });
  const tDone = toPromise(t);
  t.start();
  t.send({ type: "task.start" });
  const e = createActor(evaluation, {
    input: { taskId: tid(`t-${i}`), path: "0", node: { kind: "task", type: "atomic" }, env: rootEnv({}), entry: true },
  });
  const eDone = toPromise(e);
  e.start().send(START);
  const s = createActor(session, { input: SESSION_INPUT });
  const sDone = toPromise(s);
  s.start();
  await Promise.all([tDone, eDone, sDone]);
}

/** Microseconds of XState per trivial task: `count` tasks one after the other, after a warm-up. */
export async function machinesPerTask(count = 5000): Promise<number> {
  for (let i = 0; i < 1000; i++) await oneTask(i);
  const start = performance.now();
  for (let i = 0; i < count; i++) await oneTask(i);
  return ((performance.now() - start) * 1000) / count;
}

const never = new Promise<never>(() => undefined);
// The machines of oneTask, their one effect each never answering.
const waitingTask = task.provide({ actors: { evaluate: fromPromise<TaskResult, TaskInput>(() => never) } });
const heldRun = runMachine.provide({
  // A first delivery: its claim taken at once under a pending claim (no checkpoint due), then running its task.
  actions: { startFresh: ({ self }) => self.send({ type: "task.created", output: { kind: "ready" }, seq: 0 }) },
  // The task its child, as the Director invokes it (the delivery's key is the task's number here).
  actors: {
    task: launchedTask(waitingTask, {
      launch: (key) => ({ input: { taskId: tid(`t-${key}`), xml: "<task/>", inputs: {} } }),
      launched: (_, actor) => actor.send({ type: "task.start" }),
    }),
  },
});
const heldEvaluation = evaluation.provide({
  actors: { runAtomic: fromPromise<SuspendedResult, { path: string; env: Env }>(() => never) },
});
const heldSession = session.provide({ actors: { callModel: fromPromise<ModelReply, CallModelInput>(() => never) } });

/**
 * The actors of one trivial task while its model call is out, each role's as its shell makes them: the Director's
 * run actor with its task actor as its child, the Evaluator's evaluation and the Handler's session (a system each),
 * each machine but the run waiting on its invoked effect. Returned so that they stay reachable.
 */
function heldTask(i: number): unknown[] {
  const taskId = tid(`t-${i}`);
  const run = createActor(heldRun, { input: { scopeKey: `${i}`, taskId, first: true } }).start();
  const t: AnyActorRef | undefined = run.getSnapshot().children.task;
  if (t === undefined) throw new Error("the held run invoked no task");
  const e = createActor(heldEvaluation, {
    input: { taskId, path: "0", node: { kind: "task", type: "atomic" }, env: rootEnv({}), entry: true },
  }).start();
  e.send(START);
  const s = createActor(heldSession, { input: SESSION_INPUT }).start();
  for (const [actor, state] of [
    [run, "running"],
    [t, "running"],
    [e, "runningAtomic"],
    [s, "awaitingModel"],
  ] as const)
    if (!JSON.stringify(actor.getSnapshot().value).includes(state))
      throw new Error(`held machine not in ${state}: ${JSON.stringify(actor.getSnapshot().value)}`);
  return [run, e, s];
}

/** KB of live heap per task that {@link heldTask} holds, `count` tasks at once, after a full GC (`--expose-gc`). */
export function heldMachinesHeapPerTask(count = 10_000): number {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error("the heap floor needs node --expose-gc");
  heldTask(-1); // the machines' first use builds what every actor shares
  gc();
  const base = process.memoryUsage().heapUsed;
  const held: unknown[][] = [];
  for (let i = 0; i < count; i++) held.push(heldTask(i));
  gc();
  const perTask = (process.memoryUsage().heapUsed - base) / count / 1024;
  held.length = 0;
  return perTask;
}
