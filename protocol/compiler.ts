/**
 * Messages of the Compiler, which turns a natural-language request into a validated task template through the
 * model. Request/reply on `<root>.compiler.compile` (queue group `compiler`). Clients (`dirigent compile`) and
 * the Director (submissions with a `prompt`) ask; the Evaluator asks in `decompose` mode to split a node that
 * failed with `RESOURCE_EXHAUSTION`. When no valid template results, the answer is an `ErrorReply` with code
 * `INVALID_TEMPLATE` whose `details` hold `{attempts, errors}`.
 */
import { z } from "zod";
import { ModelId, TaskId } from "./ids.js";
import { Usage } from "./result.js";

/** The longest request text the Compiler accepts (64 KiB characters). */
export const MAX_COMPILE_PROMPT_CHARS = 65_536;

/** The most attempts one compile request may ask for. */
export const MAX_COMPILE_ATTEMPTS = 5;

/** `compile`: a request in words → a template; `decompose`: a failed node → a `sequential` or `reduce` sub-tree. */
export const CompileMode = z.enum(["compile", "decompose"]);
export type CompileMode = z.infer<typeof CompileMode>;

/** The node a `decompose` request splits, and why it failed. */
export const FailedNode = z.strictObject({
  /** The node's XML as written, when available. */
  xml: z.string().max(MAX_COMPILE_PROMPT_CHARS).optional(),
  /** Why it failed, for example `context window exhausted: 130000/102400 tokens`. */
  error: z.string().min(1).max(MAX_COMPILE_PROMPT_CHARS),
});
export type FailedNode = z.infer<typeof FailedNode>;

/** Body of `<root>.compiler.compile`. */
export const CompileRequest = z
  .strictObject({
    type: z.literal("compiler.compile"),
    /** What the task should do, in words; in `decompose` mode, what the failed node had to do. */
    prompt: z.string().min(1).max(MAX_COMPILE_PROMPT_CHARS),
    /** `compile` by default. */
    mode: CompileMode.optional(),
    /** The task this compilation belongs to; progress (`compile.retry`) and cancellation follow it. */
    taskId: TaskId.optional(),
    /** Required in `decompose` mode: the node that failed. */
    failed: FailedNode.optional(),
    /** Names of the inputs the task will be run with; the template may use them as `{{name}}`. */
    inputNames: z.array(z.string().min(1).max(200)).max(200).optional(),
    /** Model to use; the Compiler's default otherwise. */
    model: ModelId.optional(),
    /** Model answers to try, each after the previous one's validation errors are fed back (default 3). */
    maxAttempts: z.int().min(1).max(MAX_COMPILE_ATTEMPTS).optional(),
    /** In `decompose` mode, the path of the node that failed (`0.steps.2`); with `occurrence` it keys the record. */
    nodePath: z.string().optional(),
    /**
     * Which compilation of the task (of its `nodePath`, in `decompose` mode) this is, from 1: with `taskId` and what
     * is asked it keys the Compiler's record in the turns bucket, so a task re-run after a Director or Evaluator
     * crash joins the compilation still running, or replays its recorded answer, instead of calling the model again.
     * Absent (or no `taskId`): nothing is recorded.
     */
    occurrence: z.int().positive().optional(),
  })
  .refine((r) => r.mode !== "decompose" || r.failed !== undefined, {
    message: "'failed' is required in decompose mode",
    path: ["failed"],
  });
export type CompileRequest = z.infer<typeof CompileRequest>;

/** The Compiler's answer: a template that `parseTemplate` accepts. */
export const CompileReply = z.object({
  type: z.literal("compiler.result"),
  /** The validated template. */
  xml: z.string().min(1),
  /** Model answers it took, from 1. */
  attempts: z.int().positive(),
  /** The validation errors of the earlier answers, one line each, in order; absent when the first was valid. */
  errors: z.array(z.string()).optional(),
  /** Tokens used over all attempts. */
  usage: Usage.optional(),
});
export type CompileReply = z.infer<typeof CompileReply>;
