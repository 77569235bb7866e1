/**
 * Pure steps of the continuation machine (machines/evaluator/continuation.ts): request signatures, limits, the
 * failures it ends with and what a child (run or spawned) is given, as functions of its context.
 */
import type { SubtaskRequest, TaskResult } from "../../protocol/index.js";
import type { ProgressParams } from "./sequential.js";
import { extend, find, type Env } from "../language/env.js";
import {
  type ContinuationContext,
  type EvaluationOutcome,
  LAST_EVALUATOR_OUTPUT,
  RESERVED,
  type SubtaskInput,
  reservedLimit,
} from "./continuation-types.js";

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
