/**
 * Messages the Evaluator sends to a Handler to run one atomic task as one LLM session (`<root>.handler.execute`),
 * or one command of a `script` task (`<root>.handler.script`), and the replies. Both are request/reply in queue
 * group `handler`.
 */
import { z } from "zod";
import { ModelId, TaskId } from "./ids.js";
import { ContinuationKind, SessionSettings, SessionState } from "./continuation.js";
import { TaskResult } from "./result.js";

/** A parameter of a {@link TemplateTool}. */
export const TemplateToolParam = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z_][\w-]*$/, "parameter names are identifiers")
    .max(64),
  /** Declared type (`string`, `integer`, `number`, `boolean`, `array`, `object`; any other: any value). */
  type: z.string().max(64).optional(),
  /** The model must give it (no default, not `required="false"`). */
  required: z.boolean(),
  description: z.string().max(4_000).optional(),
});
export type TemplateToolParam = z.infer<typeof TemplateToolParam>;

/**
 * A function template of the Evaluator's library offered to the session as a tool (`DIRIGENT_TEMPLATE_TOOLS`): a call
 * suspends the session with a `subtask_request` naming the template, and the Evaluator runs it as a subtask.
 */
export const TemplateTool = z.strictObject({
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "tool names match ^[a-zA-Z0-9_-]{1,64}$"),
  description: z.string().max(8_000),
  params: z.array(TemplateToolParam).max(64),
});
export type TemplateTool = z.infer<typeof TemplateTool>;

/** Run one atomic task. All text is fully substituted; the Handler never sees `{{var}}`. */
export const ExecuteRequest = SessionSettings.extend({
  type: z.literal("handler.execute"),
  /** The task this node belongs to. */
  taskId: TaskId,
  /** Path of the node in the template tree (`0`, `0.steps.2`, …). */
  nodePath: z.string(),
  /** The user prompt (the task's description and instructions). */
  prompt: z.string(),
  /** The template's system prompt, appended to the Handler's base prompt. */
  system: z.string().optional(),
  /** Model to use; the Handler's configured default otherwise. */
  model: ModelId.optional(),
  /** Publish the answer as `model.delta` progress events while it arrives; the Handler's setting otherwise. */
  stream: z.boolean().optional(),
  /**
   * Context files (workspace-relative, or absolute inside the workspace): the Handler reads each with its
   * `read_file` tool and appends it to the system prompt as `<file path="…">…</file>`.
   */
  files: z.array(z.string()).optional(),
  /** Context text (inherited context, accumulated step outputs), appended to the system prompt after the files. */
  context: z.string().optional(),
  /** Continuation tools offered to the model: `run_subtask`, `request_evaluation`. None by default. */
  continuations: z.array(ContinuationKind).max(4).optional(),
  /** Library templates offered as tools; a call of one is a `run_subtask` of that template. */
  templateTools: z.array(TemplateTool).max(64).optional(),
  /**
   * Which call of this node within the task's walk this is (1, 2, …): with the node path it keys the Handler's
   * record of the session's turns, so a re-run of the task after a crash replays recorded turns instead of
   * calling the model again. Absent: nothing is recorded.
   */
  occurrence: z.int().positive().optional(),
  /** No earlier run of this call can have left a record (its task's first evaluation, first request): none is looked for. */
  fresh: z.boolean().optional(),
  /**
   * Resume a suspended session: `answer` becomes the response to its pending tool call; `prompt` is then ignored,
   * and so are the settings (`tools`, `maxTurns`, …): the session's own (`session.settings`) apply.
   */
  resume: z.object({ session: SessionState, answer: z.string() }).optional(),
  /**
   * What is left of the task's budget (and of any node's budget around this one) for this call: tokens, and cost
   * in the unit of the price table. Checked before each model call; over it, `RESOURCE_EXHAUSTION` `budget`.
   */
  budget: z
    .object({
      /** Prompt plus completion tokens left. */
      tokens: z.number().optional(),
      /** Cost left, in the unit of the price table. */
      cost: z.number().optional(),
    })
    .optional(),
});
export type ExecuteRequest = z.infer<typeof ExecuteRequest>;

/** The Handler's answer. */
export const ExecuteReply = z.object({
  type: z.literal("handler.result"),
  /** The task. */
  taskId: TaskId,
  /** The node that ran. */
  nodePath: z.string(),
  /** The session's result; `notes.usage` holds token counts. */
  result: TaskResult,
  /** With a `CONTINUATION` result: the suspended session, to send back in `resume`. */
  session: SessionState.optional(),
});
export type ExecuteReply = z.infer<typeof ExecuteReply>;

/**
 * Run one command of a `script` task. `argv` is already split and substituted element by element; no
 * shell ever sees it. The Handler runs it with its `run_script` tool (workspace, output caps, env allowlist).
 */
export const ScriptRequest = z.object({
  type: z.literal("handler.script"),
  /** The task this node belongs to. */
  taskId: TaskId,
  /** Path of the node in the template tree. */
  nodePath: z.string(),
  /** Program and arguments. */
  argv: z.array(z.string()).min(1),
  /** Working directory relative to the workspace root; the root by default. */
  cwd: z.string().optional(),
  /** Timeout in milliseconds, capped by the Handler's limit. */
  timeoutMs: z.int().positive(),
  /** Variables set for the program (a script's `<environment>`), over the Handler's allowlisted ones. */
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "variable names are [A-Za-z_][A-Za-z0-9_]*"), z.string().max(65_536))
    .optional(),
  /** `false`: the program gets only `env`, none of the Handler's allowlisted variables. */
  inheritEnv: z.boolean().optional(),
  /** As in `handler.execute`: keys the record of the outcome, so a re-run does not run the command again. */
  occurrence: z.int().positive().optional(),
});
export type ScriptRequest = z.infer<typeof ScriptRequest>;

/** What a command produced, or why it could not run. */
export const ScriptReply = z.object({
  type: z.literal("handler.script_result"),
  /** The task. */
  taskId: TaskId,
  /** The node that ran. */
  nodePath: z.string(),
  /** Exit code; null when a signal or the timeout ended the program, or when it could not start. */
  exitCode: z.int().nullable(),
  /** Whether the timeout ended the run. */
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  /** Why the command could not run at all (unknown program, run_script not enabled, …). */
  error: z.string().optional(),
});
export type ScriptReply = z.infer<typeof ScriptReply>;

/**
 * `<root>.handler.load`: how many requests of each kind a Handler process would start at once, published when that
 * changes, every second, and when it stops (all zero). A Handler whose slots are all taken passes requests to a peer
 * with free ones (actors/handler/peers.ts).
 */
export const HandlerLoad = z.strictObject({
  type: z.literal("handler.load"),
  /** The Handler process (its own subjects are `<root>.handler.direct.<handler>.<kind>`). */
  handler: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a Handler id is 1–64 characters of [A-Za-z0-9_-]"),
  /** Free slots for sessions (`handler.execute`) and script commands (`handler.script`). */
  free: z.strictObject({ execute: z.int().min(0).max(1_000_000), script: z.int().min(0).max(1_000_000) }),
});
export type HandlerLoad = z.infer<typeof HandlerLoad>;
