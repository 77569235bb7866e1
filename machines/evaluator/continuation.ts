/**
 * A CONTINUATION of an atomic task (docs/task-language.md): its Handler session suspended at a continuation tool call
 * (`run_subtask`, `spawn_subtask`, `await_subtasks`, `cancel_subtask`, `request_evaluation`, `request_user_input`).
 * The Evaluator answers it, then resumes the session with the answer as the tool's response; the session may ask
 * again, until it finishes.
 *
 * idle → inspecting → checkingSubtask → awaitingSubtask → resuming → inspecting …, or inspecting → checkingEvaluation →
 * awaitingEvaluation → resuming …, ending in done | failed. Subtasks are bounded by depth (default 5; a request's
 * `max_depth` sets the limit below it) and refused when the same request already runs on the path to this
 * node (cycle detection by task signature). A failing child fails the parent with `subtask_failure` carrying the
 * request, for a retry. Evaluations of one node are bounded (`maxEvaluations`).
 * A `request_user_input` call waits in `awaitingInput` for the answer on the task's input subject (or fails with
 * `execution_timeout`). Effects: `runSubtask`, `runEvaluation`, `waitForInput`, `resumeAtomic` and `progress`
 * (`continuation.subtask`, `continuation.evaluation`, `continuation.input`, `continuation.resumed`: the task
 * machine's visible awaiting states).
 * Spawned subtasks (machines/evaluator/spawn.ts) run as child actors `spawned.<handle>` while the session goes on:
 * `spawn_subtask` answers at once with the handle (`checkingSpawn`, the same depth and cycle checks as a subtask);
 * `await_subtasks` waits in `awaitingSpawned` until the awaited ones settle or its timeout (delay `awaitTimeout`)
 * passes; `cancel_subtask` stops one. A spawned child that fails does not fail the session: its status answers the
 * await. When the session ends (done or failed) the ones still running are stopped and listed in
 * `notes.cancelled_subtasks` (`continuation.spawn`, `continuation.await`, `continuation.cancel` progress events).
 */
import { assign, enqueueActions, fromPromise, setup } from "xstate";
import {
  AwaitRequest,
  CancelRequest,
  EvaluationRequest,
  InputRequest,
  SubtaskRequest,
  type SessionState,
  type TaskResult,
} from "../../protocol/index.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf, idleUntilStarted } from "../invoke-events.js";
import type { ProgressParams } from "./sequential.js";
import { messageOf } from "../../protocol/errors.js";
import { extend, find, type Env } from "../language/env.js";

import {
  type ContinuationContext,
  type ContinuationInput,
  type EvaluationOutcome,
  type EvaluationStepInput,
  type InputWaitInput,
  LAST_EVALUATOR_OUTPUT,
  RESERVED,
  type ResumeInput,
  type SubtaskInput,
  type SuspendedResult,
  reservedLimit,
} from "./continuation-context.js";
import {
  allSettled,
  awaitAnswer,
  awaitedHandles,
  cancelOutcome,
  cancelled,
  handleOfEvent,
  nextHandle,
  orphansOf,
  settled,
  spawnActorId,
  threw,
} from "./spawn.js";

export * from "./continuation-context.js";

/** FNV-1a over a request's identity: type, subtype, description and inputs (not hints or settings). */
export function signatureOf(request: SubtaskRequest): string {
  const text = JSON.stringify([request.type, request.subtype ?? "", request.description.trim(), request.inputs ?? {}]);
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

/** Whether the suspended session carries a valid request under `note`. */
export function asks(context: ContinuationContext, note: string, schema: { safeParse(v: unknown): { success: boolean } }): boolean {
  return context.result.session !== undefined && schema.safeParse(context.result.notes[note]).success;
}

export function chainOf(env: Env): string[] {
  const found = find(env, RESERVED.chain);
  return found.found && Array.isArray(found.value) ? found.value.filter((s): s is string => typeof s === "string") : [];
}

export function depthLimit(context: ContinuationContext): number {
  return reservedLimit(context.env, RESERVED.maxDepth, context.maxDepth);
}

export function failure(
  context: ContinuationContext,
  reason: "subtask_failure" | "execution_halted" | "execution_timeout" | "unexpected_error",
  message: string,
  details?: Record<string, unknown>,
): TaskResult {
  return {
    content: context.result.content,
    status: "FAILED",
    notes: context.result.notes,
    error: { type: "TASK_FAILURE", reason, message, content: context.result.content, ...(details ? { details } : {}) },
  };
}

export const UNREADABLE =
  "CONTINUATION without a suspended session and a valid subtask_request, spawn_request, await_request, cancel_request, evaluation_request or input_request";
export const CYCLE = "subtask cycle: the same request is already running on this path";

export function tooDeepFailure(context: ContinuationContext): TaskResult {
  const limit = depthLimit(context);
  return failure(context, "subtask_failure", `subtask depth limit of ${limit} reached`, {
    request: context.pending?.request,
    limit,
    kind: "depth_limit",
  });
}

export function subtaskFailure(context: ContinuationContext, output: TaskResult): TaskResult {
  const message = `subtask failed: ${output.error?.message ?? "no result"}`;
  return failure(context, "subtask_failure", message, { request: context.pending?.request, subtaskError: output.error });
}

/** The evaluation's answer resumes the session; its output is kept and bound for what follows (C21). */
export function evaluationAnswer(context: ContinuationContext, outcome: EvaluationOutcome): Partial<ContinuationContext> {
  const { answer, lastEvaluatorOutput } = outcome;
  return { answer, lastEvaluatorOutput, env: extend(context.env, { [LAST_EVALUATOR_OUTPUT]: lastEvaluatorOutput }) };
}

const summary = (text: string) => (text.length > 80 ? `${text.slice(0, 77)}…` : text);

/** The progress event `continuation.<step>` of the context (the last spawned or cancelled one, for those steps). */
export function progressOf(
  context: ContinuationContext,
  step: "subtask" | "spawn" | "await" | "cancel" | "evaluation" | "input" | "resumed",
): ProgressParams {
  const { path: nodePath, pending } = context;
  const event = `continuation.${step}`;
  const depth = context.chain.length + 1;
  const description = pending?.kind === "subtask" || pending?.kind === "spawn" ? summary(pending.request.description) : "";
  switch (step) {
    case "subtask":
      return {
        event,
        message: `subtask ${context.subtasks} (depth ${depth}): ${description}`,
        data: { nodePath, subtask: context.subtasks, depth, request: pending?.request },
      };
    case "spawn": {
      const handle = context.spawned.at(-1)?.handle ?? "";
      return {
        event,
        message: `spawned ${handle} (depth ${depth}): ${description}`,
        data: { nodePath, handle, depth, request: pending?.request },
      };
    }
    case "await":
      return {
        event,
        message: `awaiting ${context.awaiting.join(", ") || "nothing"}`,
        data: { nodePath, handles: context.awaiting, request: pending?.request },
      };
    case "cancel": {
      const handle = pending?.kind === "cancel" ? pending.request.handle : "";
      const status = context.spawned.find((s) => s.handle === handle)?.status ?? "unknown";
      return { event, message: `cancel ${handle}: ${status}`, data: { nodePath, handle, status } };
    }
    case "evaluation":
      return {
        event,
        message: `evaluation ${context.evaluations}/${context.maxEvaluations}`,
        data: { nodePath, iteration: context.evaluations, request: pending?.request },
      };
    case "input":
      return { event, message: pending?.kind === "input" ? pending.request.question : "", data: { nodePath, request: pending?.request } };
    case "resumed":
      return { event, message: `resumed after ${pending?.kind ?? "continuation"}`, data: { nodePath } };
  }
}

/**
 * What the pending subtask or spawn request's child is given: the request, its number, and an environment whose
 * chain carries the request's signature and whose depth limit a request's `max_depth` may lower.
 */
export function childInput(context: ContinuationContext, number: number, scope: "subtask" | "spawn"): SubtaskInput {
  const pending = context.pending?.kind === "subtask" || context.pending?.kind === "spawn" ? context.pending : undefined;
  const request = pending?.request ?? { type: "atomic", description: "" };
  const limit = request.max_depth === undefined ? depthLimit(context) : context.chain.length + 1 + request.max_depth - 1;
  return {
    scopeKey: context.scopeKey,
    path: context.path,
    request,
    number,
    scope,
    env: extend(context.env, { [RESERVED.chain]: [...context.chain, pending?.signature ?? ""], [RESERVED.maxDepth]: limit }),
  };
}

/** The notes of the machine's output: counts of subtasks, spawned subtasks and evaluations, and the orphans cancelled. */
export function outputNotes(context: ContinuationContext): Record<string, unknown> {
  return {
    ...(context.subtasks > 0 ? { subtasks: context.subtasks } : {}),
    ...(context.spawned.length > 0 ? { spawned_subtasks: context.spawned.length } : {}),
    ...(context.orphans.length > 0 ? { cancelled_subtasks: context.orphans } : {}),
    ...(context.evaluations > 0 ? { evaluations: context.evaluations } : {}),
    ...(context.lastEvaluatorOutput === undefined ? {} : { [LAST_EVALUATOR_OUTPUT]: context.lastEvaluatorOutput }),
  };
}

/** The continuation machine. Its output is the node's final result. */
export const continuationMachine = setup({
  types: {
    input: {} as ContinuationInput,
    context: {} as ContinuationContext,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    pendSubtask: assign({
      pending: ({ context }) => {
        const request = SubtaskRequest.parse(context.result.notes["subtask_request"]);
        return { kind: "subtask" as const, request, signature: signatureOf(request) };
      },
    }),
    pendSpawn: assign({
      pending: ({ context }) => {
        const request = SubtaskRequest.parse(context.result.notes["spawn_request"]);
        return { kind: "spawn" as const, request, signature: signatureOf(request) };
      },
    }),
    pendAwait: assign(({ context }) => {
      const request = AwaitRequest.parse(context.result.notes["await_request"]);
      return { pending: { kind: "await" as const, request }, awaiting: awaitedHandles(context.spawned, request) };
    }),
    /** Starts the pending spawn as child actor `spawned.<handle>`; the session is answered with the handle. */
    spawnSubtask: enqueueActions(({ context, enqueue }) => {
      if (context.pending?.kind !== "spawn") return;
      const handle = nextHandle(context.spawned);
      const input = childInput(context, context.spawned.length + 1, "spawn");
      enqueue.spawnChild("runSubtask", { id: spawnActorId(handle), input });
      enqueue.assign({
        spawned: [...context.spawned, { handle, request: context.pending.request, status: "running" as const, collected: false }],
        answer: JSON.stringify({ handle }),
      });
    }),
    settleSpawned: assign({
      spawned: ({ context, event }) => settled(context.spawned, handleOfEvent(event.type) ?? "", outputOf<TaskResult>(event)),
    }),
    settleSpawnedThrew: assign({
      spawned: ({ context, event }) => threw(context.spawned, handleOfEvent(event.type) ?? "", errorOf(event)),
    }),
    answerAwaited: assign(({ context }) => awaitAnswer(context.spawned, context.awaiting)),
    /** `cancel_subtask`: stops the child if it runs; the session is answered with its status. */
    cancelSpawned: enqueueActions(({ context, enqueue }) => {
      const request = CancelRequest.parse(context.result.notes["cancel_request"]);
      const handle = request.handle;
      enqueue.assign({ pending: { kind: "cancel", request } });
      const outcome = cancelOutcome(context.spawned, handle);
      if (outcome.stop) enqueue.stopChild(spawnActorId(handle));
      enqueue.assign({ spawned: outcome.spawned, answer: outcome.answer });
    }),
    /** The session ended: spawned subtasks still running are stopped and reported. */
    cancelOrphans: enqueueActions(({ context, enqueue }) => {
      const orphans = orphansOf(context.spawned);
      if (orphans.length === 0) return;
      for (const handle of orphans) enqueue.stopChild(spawnActorId(handle));
      enqueue.assign({ spawned: cancelled(context.spawned, orphans), orphans });
    }),
    pendEvaluation: assign({
      pending: ({ context }) => ({
        kind: "evaluation" as const,
        request: EvaluationRequest.parse(context.result.notes["evaluation_request"]),
      }),
    }),
    pendInput: assign({
      pending: ({ context }) => ({ kind: "input" as const, request: InputRequest.parse(context.result.notes["input_request"]) }),
    }),
    failUnreadable: assign({ failure: ({ context }) => failure(context, "unexpected_error", UNREADABLE) }),
    failTooDeep: assign({ failure: ({ context }) => tooDeepFailure(context) }),
    failCycle: assign({
      failure: ({ context }) => failure(context, "subtask_failure", CYCLE, { request: context.pending?.request, kind: "cycle" }),
    }),
    countSubtask: assign({ subtasks: ({ context }) => context.subtasks + 1 }),
    failSubtask: assign({ failure: ({ context, event }) => subtaskFailure(context, outputOf<TaskResult>(event)) }),
    failSubtaskThrew: assign({
      failure: ({ context, event }) =>
        failure(context, "subtask_failure", `subtask failed: ${String(errorOf(event))}`, { request: context.pending?.request }),
    }),
    answerWithSubtask: assign({ answer: ({ event }) => outputOf<TaskResult>(event).content }),
    countEvaluation: assign({ evaluations: ({ context }) => context.evaluations + 1 }),
    failEvaluationLimit: assign({
      failure: ({ context }) =>
        failure(context, "execution_halted", `evaluation limit of ${context.maxEvaluations} reached`, {
          request: context.pending?.request,
        }),
    }),
    /** C21: later evaluations and subtasks of this session see the latest evaluation's output. */
    answerWithEvaluation: assign(({ context, event }) => evaluationAnswer(context, outputOf<EvaluationOutcome>(event))),
    failEvaluationThrew: assign({
      failure: ({ context, event }) => failure(context, "unexpected_error", `evaluation failed: ${String(errorOf(event))}`),
    }),
    answerWithInput: assign({ answer: ({ event }) => outputOf<string>(event) }),
    failInputTimeout: assign({
      failure: ({ context, event }) =>
        failure(context, "execution_timeout", messageOf(errorOf(event)), { request: context.pending?.request }),
    }),
    storeResumed: assign({ result: ({ event }) => outputOf<SuspendedResult>(event), answer: "" }),
    failResumeThrew: assign({
      failure: ({ context, event }) => failure(context, "unexpected_error", `resume failed: ${String(errorOf(event))}`),
    }),
  },
  actors: {
    runSubtask: fromPromise<TaskResult, SubtaskInput>(async () => notProvided("continuation.runSubtask")),
    runEvaluation: fromPromise<EvaluationOutcome, EvaluationStepInput>(async () => notProvided("continuation.runEvaluation")),
    resumeAtomic: fromPromise<SuspendedResult, ResumeInput>(async () => notProvided("continuation.resumeAtomic")),
    waitForInput: fromPromise<string, InputWaitInput>(async () => notProvided("continuation.waitForInput")),
  },
  guards: {
    asksSubtask: ({ context }) => asks(context, "subtask_request", SubtaskRequest),
    asksSpawn: ({ context }) => asks(context, "spawn_request", SubtaskRequest),
    asksAwait: ({ context }) => asks(context, "await_request", AwaitRequest),
    asksCancel: ({ context }) => asks(context, "cancel_request", CancelRequest),
    asksEvaluation: ({ context }) => asks(context, "evaluation_request", EvaluationRequest),
    asksInput: ({ context }) => asks(context, "input_request", InputRequest),
    isContinuation: ({ context }) => context.result.status === "CONTINUATION",
    tooDeep: ({ context }) => context.chain.length + 1 > depthLimit(context),
    isCycle: ({ context }) =>
      (context.pending?.kind === "subtask" || context.pending?.kind === "spawn") && context.chain.includes(context.pending.signature),
    isSpawnedChild: ({ event }) => handleOfEvent(event.type) !== undefined,
    awaitedSettled: ({ context }) => allSettled(context.spawned, context.awaiting),
    awaitTimed: ({ context }) => context.pending?.kind === "await" && context.pending.request.timeout_ms !== undefined,
    evaluationsLeft: ({ context }) => context.evaluations < context.maxEvaluations,
    subtaskFailed: ({ event }) => outputOf<TaskResult>(event).status !== "COMPLETE",
  },
  delays: {
    awaitTimeout: ({ context }) => (context.pending?.kind === "await" ? (context.pending.request.timeout_ms ?? 0) : 0),
  },
}).createMachine({
  id: "continuation",
  context: ({ input }) => ({
    ...input,
    maxEvaluations: reservedLimit(input.env, RESERVED.maxEvaluations, input.maxEvaluations),
    chain: chainOf(input.env),
    subtasks: 0,
    evaluations: 0,
    spawned: [],
    awaiting: [],
    orphans: [],
  }),
  // A spawned subtask settles whatever state the machine is in.
  on: {
    "xstate.done.actor.*": { guard: "isSpawnedChild", actions: "settleSpawned" },
    "xstate.error.actor.*": { guard: "isSpawnedChild", actions: "settleSpawnedThrew" },
  },
  initial: "idle",
  states: {
    idle: idleUntilStarted("inspecting"),
    inspecting: {
      description: "What does the suspended session ask for?",
      always: [
        {
          guard: "asksSubtask",
          target: "checkingSubtask",
          actions: "pendSubtask",
        },
        { guard: "asksSpawn", target: "checkingSpawn", actions: "pendSpawn" },
        { guard: "asksAwait", target: "awaitingSpawned", actions: "pendAwait" },
        {
          guard: "asksCancel",
          target: "resuming",
          actions: ["cancelSpawned", { type: "progress", params: ({ context }) => progressOf(context, "cancel") }],
        },
        { guard: "asksEvaluation", target: "checkingEvaluation", actions: "pendEvaluation" },
        { guard: "asksInput", target: "awaitingInput", actions: "pendInput" },
        {
          guard: "isContinuation",
          target: "failed",
          actions: "failUnreadable",
        },
        { target: "done" },
      ],
    },
    checkingSubtask: {
      description: "Refuse a subtask nested too deep, or one already running on the path here (a cycle).",
      always: [
        {
          guard: "tooDeep",
          target: "failed",
          actions: "failTooDeep",
        },
        {
          guard: "isCycle",
          target: "failed",
          actions: "failCycle",
        },
        { target: "awaitingSubtask", actions: "countSubtask" },
      ],
    },
    awaitingSubtask: {
      description: "A child task runs; the parent's session waits for its result.",
      entry: {
        type: "progress",
        params: ({ context }) => progressOf(context, "subtask"),
      },
      invoke: {
        src: "runSubtask",
        input: ({ context }) => childInput(context, context.subtasks, "subtask"),
        onDone: [
          {
            guard: "subtaskFailed",
            target: "failed",
            actions: "failSubtask",
          },
          { target: "resuming", actions: "answerWithSubtask" },
        ],
        onError: { target: "failed", actions: "failSubtaskThrew" },
      },
    },
    checkingSpawn: {
      description: "Refuse a spawned subtask nested too deep or already running on the path here, as for a subtask; else start it.",
      always: [
        { guard: "tooDeep", target: "failed", actions: "failTooDeep" },
        { guard: "isCycle", target: "failed", actions: "failCycle" },
        { target: "resuming", actions: ["spawnSubtask", { type: "progress", params: ({ context }) => progressOf(context, "spawn") }] },
      ],
    },
    awaitingSpawned: {
      description: "The session waits for spawned subtasks to settle, or for its timeout; still running ones are reported running.",
      entry: {
        type: "progress",
        params: ({ context }) => progressOf(context, "await"),
      },
      always: { guard: "awaitedSettled", target: "resuming", actions: "answerAwaited" },
      initial: "timing",
      states: {
        timing: {
          description: "Has the await a timeout?",
          always: [{ guard: "awaitTimed", target: "timed" }, { target: "untimed" }],
        },
        untimed: { description: "Until the awaited subtasks settle." },
        timed: {
          description: "Until they settle or the timeout passes.",
          after: { awaitTimeout: { target: "#continuation.resuming", actions: "answerAwaited" } },
        },
      },
    },
    checkingEvaluation: {
      description: "Is an evaluation left for this session?",
      always: [
        { guard: "evaluationsLeft", target: "awaitingEvaluation", actions: "countEvaluation" },
        { target: "failed", actions: "failEvaluationLimit" },
      ],
    },
    awaitingEvaluation: {
      description: "An evaluation of the director's output runs (its script first, when the request names one).",
      entry: {
        type: "progress",
        params: ({ context }) => progressOf(context, "evaluation"),
      },
      invoke: {
        src: "runEvaluation",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: context.path,
          request: context.pending?.kind === "evaluation" ? context.pending.request : { type: "llm", criteria: "" },
          output: context.result.content,
          iteration: context.evaluations,
          env: context.env,
        }),
        onDone: {
          target: "resuming",
          actions: "answerWithEvaluation",
        },
        onError: { target: "failed", actions: "failEvaluationThrew" },
      },
    },
    awaitingInput: {
      description: "The session asked the user a question; the task waits for the answer on its input subject, or the timeout.",
      entry: {
        type: "progress",
        params: ({ context }) => progressOf(context, "input"),
      },
      invoke: {
        src: "waitForInput",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: context.path,
          request: context.pending?.kind === "input" ? context.pending.request : { question: "" },
        }),
        onDone: { target: "resuming", actions: "answerWithInput" },
        onError: {
          target: "failed",
          actions: "failInputTimeout",
        },
      },
    },
    resuming: {
      description: "The parent's session continues with the answer as its tool response.",
      entry: {
        type: "progress",
        params: ({ context }) => progressOf(context, "resumed"),
      },
      invoke: {
        src: "resumeAtomic",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: context.path,
          session: context.result.session as SessionState,
          answer: context.answer ?? "",
        }),
        onDone: { target: "inspecting", actions: "storeResumed" },
        onError: { target: "failed", actions: "failResumeThrew" },
      },
    },
    done: { description: "The session finished; spawned subtasks still running are cancelled.", type: "final", entry: "cancelOrphans" },
    failed: {
      description:
        "A child failed, a limit was reached, or the session could not be resumed; spawned subtasks still running are cancelled.",
      type: "final",
      entry: "cancelOrphans",
    },
  },
  output: ({ context }) => {
    if (context.failure) {
      const orphans = context.orphans.length > 0 ? { cancelled_subtasks: context.orphans } : {};
      return { ...context.failure, notes: { ...context.failure.notes, ...orphans } };
    }
    const { session: _session, ...result } = context.result;
    return { ...result, notes: { ...result.notes, ...outputNotes(context) } };
  },
});
