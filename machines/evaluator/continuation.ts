/**
 * A CONTINUATION of an atomic task (docs/task-language.md): its Handler session suspended at a `run_subtask` or
 * `request_evaluation` tool call. The Evaluator runs the child, then resumes the session with the child's answer
 * as the tool's response; the session may ask again, until it finishes.
 *
 * inspecting → checkingSubtask → awaitingSubtask → resuming → inspecting …, or inspecting → checkingEvaluation →
 * awaitingEvaluation → resuming …, ending in done | failed. Subtasks are bounded by depth (default 5; a request's
 * `max_depth` sets the limit below it) and refused when the same request already runs on the path to this
 * node (cycle detection by task signature). A failing child fails the parent with `subtask_failure` carrying the
 * request, for a retry. Evaluations of one node are bounded (`maxEvaluations`).
 * A `request_user_input` call waits in `awaitingInput` for the answer on the task's input subject (or fails with
 * `execution_timeout`). Effects: `runSubtask`, `runEvaluation`, `waitForInput`, `resumeAtomic` and `progress`
 * (`continuation.subtask`, `continuation.evaluation`, `continuation.input`, `continuation.resumed`: the task
 * machine's visible awaiting states).
 */
import { assign, fromPromise, setup } from "xstate";
import { EvaluationRequest, InputRequest, SubtaskRequest, type SessionState, type TaskResult } from "../../protocol/index.js";
import { extend, find, type Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf } from "../invoke-events.js";
import type { ProgressParams } from "./sequential.js";
import { messageOf } from "../../protocol/errors.js";

/** Env bindings the Evaluator reserves (`$` names cannot be written in a template). */
export const RESERVED = {
  /** Signatures of the subtask requests on the path to this node, outermost first. */
  chain: "$subtask_chain",
  /** Deepest subtask nesting allowed here. */
  maxDepth: "$subtask_max_depth",
  /** Evaluations one director session may ask for. */
  maxEvaluations: "$max_evaluations",
} as const;

/** A positive integer bound under a reserved name, or `fallback`. */
export function reservedLimit(env: Env, name: string, fallback: number): number {
  const found = find(env, name);
  return found.found && typeof found.value === "number" && Number.isInteger(found.value) && found.value > 0 ? found.value : fallback;
}

/** Default deepest subtask nesting (a setting: `DIRIGENT_MAX_SUBTASK_DEPTH`). */
export const DEFAULT_MAX_SUBTASK_DEPTH = 5;
/** Default evaluations one director session may ask for. */
export const DEFAULT_MAX_EVALUATIONS = 5;

/** A result the Handler suspended: CONTINUATION with its session. */
export type SuspendedResult = TaskResult & { session?: SessionState };

/** Input of a continuation. */
export interface ContinuationInput {
  /** Path of the atomic node. */
  path: string;
  /** The node's environment. */
  env: Env;
  /** The CONTINUATION result. */
  result: SuspendedResult;
  /** Default deepest nesting, when the environment sets none. */
  maxDepth: number;
  /** Evaluations one session may ask for. */
  maxEvaluations: number;
}

export type Pending =
  | { kind: "subtask"; request: SubtaskRequest; signature: string }
  | { kind: "evaluation"; request: EvaluationRequest }
  | { kind: "input"; request: InputRequest };

/** What `waitForInput` is given. */
export interface InputWaitInput {
  path: string;
  request: InputRequest;
}

export interface ContinuationContext extends ContinuationInput {
  chain: string[];
  pending?: Pending;
  /** Subtasks run so far. */
  subtasks: number;
  /** Evaluations run so far. */
  evaluations: number;
  /** The answer to resume the session with. */
  answer?: string;
  /** The latest evaluation's output, bound as `last_evaluator_output`. */
  lastEvaluatorOutput?: string;
  failure?: TaskResult;
}

/** What `runSubtask` is given: the request and the environment the child starts from. */
export interface SubtaskInput {
  path: string;
  request: SubtaskRequest;
  /** Number of the subtask within this node, from 1. */
  number: number;
  /** Reserved bindings the child carries (chain, depth limit). */
  env: Env;
}

/** What `runEvaluation` is given. */
export interface EvaluationStepInput {
  path: string;
  request: EvaluationRequest;
  /** The director's output so far. */
  output: string;
  /** 1-based. */
  iteration: number;
  env: Env;
}

/** What `runEvaluation` answers: the evaluation, and the text the director's session gets back. */
export interface EvaluationOutcome {
  result: TaskResult;
  answer: string;
  /** The evaluation's output (or its error): bound as `last_evaluator_output`. */
  lastEvaluatorOutput: string;
}

/** The one variable that survives between continuations of a dynamic director–evaluator (hoidn's seed 000). */
export const LAST_EVALUATOR_OUTPUT = "last_evaluator_output";

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

function chainOf(env: Env): string[] {
  const found = find(env, RESERVED.chain);
  return found.found && Array.isArray(found.value) ? found.value.filter((s): s is string => typeof s === "string") : [];
}

function depthLimit(context: ContinuationContext): number {
  return reservedLimit(context.env, RESERVED.maxDepth, context.maxDepth);
}

function failure(
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

const UNREADABLE = "CONTINUATION without a suspended session and a valid subtask_request, evaluation_request or input_request";
const CYCLE = "subtask cycle: the same request is already running on this path";

function subtaskPending(request: SubtaskRequest) {
  return { kind: "subtask" as const, request, signature: signatureOf(request) };
}

function tooDeepFailure(context: ContinuationContext): TaskResult {
  const limit = depthLimit(context);
  return failure(context, "subtask_failure", `subtask depth limit of ${limit} reached`, {
    request: context.pending?.request,
    limit,
    kind: "depth_limit",
  });
}

function subtaskFailure(context: ContinuationContext, output: TaskResult): TaskResult {
  const message = `subtask failed: ${output.error?.message ?? "no result"}`;
  return failure(context, "subtask_failure", message, { request: context.pending?.request, subtaskError: output.error });
}

/** The evaluation's answer resumes the session; its output is kept and bound for what follows (C21). */
function evaluationAnswer(context: ContinuationContext, outcome: EvaluationOutcome): Partial<ContinuationContext> {
  const { answer, lastEvaluatorOutput } = outcome;
  return { answer, lastEvaluatorOutput, env: extend(context.env, { [LAST_EVALUATOR_OUTPUT]: lastEvaluatorOutput }) };
}

const summary = (text: string) => (text.length > 80 ? `${text.slice(0, 77)}…` : text);

/** The continuation machine. Its output is the node's final result. */
export const continuationMachine = setup({
  types: {
    input: {} as ContinuationInput,
    context: {} as ContinuationContext,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    pendSubtask: assign({ pending: ({ context }) => subtaskPending(SubtaskRequest.parse(context.result.notes["subtask_request"])) }),
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
    resumeAtomic: fromPromise<SuspendedResult, { path: string; session: SessionState; answer: string }>(async () =>
      notProvided("continuation.resumeAtomic"),
    ),
    waitForInput: fromPromise<string, InputWaitInput>(async () => notProvided("continuation.waitForInput")),
  },
  guards: {
    asksSubtask: ({ context }) =>
      context.result.session !== undefined && SubtaskRequest.safeParse(context.result.notes["subtask_request"]).success,
    asksEvaluation: ({ context }) =>
      context.result.session !== undefined && EvaluationRequest.safeParse(context.result.notes["evaluation_request"]).success,
    asksInput: ({ context }) =>
      context.result.session !== undefined && InputRequest.safeParse(context.result.notes["input_request"]).success,
    isContinuation: ({ context }) => context.result.status === "CONTINUATION",
    tooDeep: ({ context }) => context.chain.length + 1 > depthLimit(context),
    isCycle: ({ context }) => context.pending?.kind === "subtask" && context.chain.includes(context.pending.signature),
    evaluationsLeft: ({ context }) => context.evaluations < context.maxEvaluations,
    subtaskFailed: ({ event }) => outputOf<TaskResult>(event).status !== "COMPLETE",
  },
}).createMachine({
  id: "continuation",
  context: ({ input }) => ({
    ...input,
    maxEvaluations: reservedLimit(input.env, RESERVED.maxEvaluations, input.maxEvaluations),
    chain: chainOf(input.env),
    subtasks: 0,
    evaluations: 0,
  }),
  initial: "inspecting",
  states: {
    inspecting: {
      description: "What does the suspended session ask for?",
      always: [
        {
          guard: "asksSubtask",
          target: "checkingSubtask",
          actions: "pendSubtask",
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
        params: ({ context }) => ({
          event: "continuation.subtask",
          message: `subtask ${context.subtasks} (depth ${context.chain.length + 1}): ${summary(context.pending?.kind === "subtask" ? context.pending.request.description : "")}`,
          data: { nodePath: context.path, subtask: context.subtasks, depth: context.chain.length + 1, request: context.pending?.request },
        }),
      },
      invoke: {
        src: "runSubtask",
        input: ({ context }) => {
          const pending = context.pending?.kind === "subtask" ? context.pending : undefined;
          const request = pending?.request ?? { type: "atomic", description: "" };
          const limit = request.max_depth === undefined ? depthLimit(context) : context.chain.length + 1 + request.max_depth - 1;
          return {
            path: context.path,
            request,
            number: context.subtasks,
            env: extend(context.env, { [RESERVED.chain]: [...context.chain, pending?.signature ?? ""], [RESERVED.maxDepth]: limit }),
          };
        },
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
        params: ({ context }) => ({
          event: "continuation.evaluation",
          message: `evaluation ${context.evaluations}/${context.maxEvaluations}`,
          data: { nodePath: context.path, iteration: context.evaluations, request: context.pending?.request },
        }),
      },
      invoke: {
        src: "runEvaluation",
        input: ({ context }) => ({
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
        params: ({ context }) => ({
          event: "continuation.input",
          message: context.pending?.kind === "input" ? context.pending.request.question : "",
          data: { nodePath: context.path, request: context.pending?.request },
        }),
      },
      invoke: {
        src: "waitForInput",
        input: ({ context }) => ({
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
        params: ({ context }) => ({
          event: "continuation.resumed",
          message: `resumed after ${context.pending?.kind ?? "continuation"}`,
          data: { nodePath: context.path },
        }),
      },
      invoke: {
        src: "resumeAtomic",
        input: ({ context }) => ({ path: context.path, session: context.result.session as SessionState, answer: context.answer ?? "" }),
        onDone: { target: "inspecting", actions: "storeResumed" },
        onError: { target: "failed", actions: "failResumeThrew" },
      },
    },
    done: { description: "The session finished.", type: "final" },
    failed: { description: "A child failed, a limit was reached, or the session could not be resumed.", type: "final" },
  },
  output: ({ context }) => {
    if (context.failure) return context.failure;
    const { session: _session, ...result } = context.result;
    const counts = {
      ...(context.subtasks > 0 ? { subtasks: context.subtasks } : {}),
      ...(context.evaluations > 0 ? { evaluations: context.evaluations } : {}),
      ...(context.lastEvaluatorOutput === undefined ? {} : { [LAST_EVALUATOR_OUTPUT]: context.lastEvaluatorOutput }),
    };
    return { ...result, notes: { ...result.notes, ...counts } };
  },
});
