/**
 * The floor under workloads 1–2: the three machines one trivial task runs (the Director's task machine, the
 * Evaluator's evaluation of an atomic node, the Handler's session), created, started and run to their end with effects
 * that answer at once: no NATS, no JSON, no model. What a task costs in XState alone, per task.
 */
import { assign, createActor, fromPromise, toPromise } from "xstate";
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
import { taskMachine } from "../../machines/director/task.js";
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
