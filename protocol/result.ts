/**
 * What a task produces: a {@link TaskResult}, and when it fails, a typed {@link TaskError}.
 * The field names and failure reasons are the ones existing templates and callers read; where the designs they
 * were written for disagree, the choice taken is recorded in docs/design.md.
 */
import { z } from "zod";
import { messageOf } from "./errors.js";

/** Status of a task result. WAITING/RUNNING are actor states, never result statuses. */
export const ReturnStatus = z.enum(["COMPLETE", "CONTINUATION", "FAILED"]);
export type ReturnStatus = z.infer<typeof ReturnStatus>;

/** Free-form metadata attached to a result (`dataUsage`, `successScore`, `usage`, …). */
export const Notes = z.record(z.string(), z.unknown());
export type Notes = z.infer<typeof Notes>;

/**
 * Why a task failed, for `TASK_FAILURE` errors: the reasons existing templates and callers already handle, plus
 * `not_supported` (a construct the runtime does not run) and `model_error` (the model API failed or refused).
 */
export const FailureReason = z.enum([
  "context_retrieval_failure",
  "context_matching_failure",
  "context_parsing_failure",
  "xml_validation_failure",
  "output_format_failure",
  "execution_timeout",
  "execution_halted",
  "subtask_failure",
  "input_validation_failure",
  "unexpected_error",
  "not_supported",
  "model_error",
]);
export type FailureReason = z.infer<typeof FailureReason>;

/** Used/limit pair of a bounded resource. */
export const ResourceMetrics = z.object({
  /** Amount consumed when the limit was hit. */
  used: z.number(),
  /** The configured limit. */
  limit: z.number(),
});

/** A resource limit was reached; recovery is decomposition, never an automatic retry. */
export const ResourceExhaustion = z.object({
  type: z.literal("RESOURCE_EXHAUSTION"),
  /** Which limit was reached; `budget`: the task's `max_tokens` or `max_cost`. */
  resource: z.enum(["turns", "context", "output", "budget"]),
  /** With `budget`: which one ran out (metrics are then tokens or cost). */
  budget: z.enum(["tokens", "cost"]).optional(),
  /** Human-readable explanation. */
  message: z.string(),
  /** Consumption at the time the limit was hit. */
  metrics: ResourceMetrics.optional(),
  /** Partial output produced before the limit. */
  content: z.string().optional(),
});

/** The task could not be carried out. */
export const TaskFailure = z.object({
  type: z.literal("TASK_FAILURE"),
  /** Failure category. */
  reason: FailureReason,
  /** Human-readable explanation. */
  message: z.string(),
  /** Partial output, when there is any. */
  content: z.string().optional(),
  /** Metadata of the failing step. */
  notes: Notes.optional(),
  /** Structured detail: partial results, failing step, the request that failed, … */
  details: z.record(z.string(), z.unknown()).optional(),
});

/** A template that is not well-formed or not valid; carries the location of the problem. */
export const XmlParseError = z.object({
  type: z.literal("XML_PARSE_ERROR"),
  /** What is wrong. */
  message: z.string(),
  /** 1-based line and column of the problem. */
  location: z.object({ line: z.number().int(), col: z.number().int() }).optional(),
});

/** Any typed task error. */
export const TaskError = z.discriminatedUnion("type", [ResourceExhaustion, TaskFailure, XmlParseError]);
export type TaskError = z.infer<typeof TaskError>;

/** The result of executing a task node. `content` holds all output, complete or partial. */
export const TaskResult = z.object({
  /** The output text. */
  content: z.string(),
  /** Whether the task finished, failed, or asks to continue. */
  status: ReturnStatus,
  /** Metadata only. */
  notes: Notes,
  /** JSON parsed from `content` when the template declares `<output_format type="json">` (not in `notes`). */
  parsedContent: z.unknown().optional(),
  /** Present when `status` is `FAILED`. */
  error: TaskError.optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

/**
 * A FAILED result with a `TASK_FAILURE` error and no output: the one way to build the failure every role returns.
 *
 * @example
 * taskFailure("input_validation_failure", "missing <inputs>", { input: "x" })
 */
export function taskFailure(reason: FailureReason, message: string, details?: Record<string, unknown>): TaskResult {
  return { content: "", status: "FAILED", notes: {}, error: { type: "TASK_FAILURE", reason, message, ...(details ? { details } : {}) } };
}

/** What an effect threw, as the task error of an unexpected failure. */
export function thrownError(error: unknown): TaskError {
  return { type: "TASK_FAILURE", reason: "unexpected_error", message: messageOf(error) };
}

/** The result of a task whose template does not parse or defines nothing to run, at `location` when known. */
export function xmlParseFailure(message: string, location?: { line: number; col: number }): TaskResult {
  return { content: "", status: "FAILED", notes: {}, error: { type: "XML_PARSE_ERROR", message, ...(location ? { location } : {}) } };
}

/** Token usage of model calls. */
export const Usage = z.object({
  /** Prompt tokens, summed over calls. */
  promptTokens: z.number().int().nonnegative(),
  /** Completion tokens, summed over calls. */
  completionTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;
