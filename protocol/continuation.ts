/**
 * CONTINUATION: a result that asks for a subtask or an evaluation before its task goes on (docs/task-language.md).
 * A Handler session asks through its `run_subtask` or `request_evaluation` tool; the Handler answers the
 * Evaluator with a `CONTINUATION` result carrying the request in its notes and the suspended session
 * ({@link SessionState}); the Evaluator runs the child and resumes the session with the child's answer as the
 * tool's response (`ExecuteRequest.resume`). Any Handler can resume any session: the state travels in the messages.
 * The spawn tools travel the same way (`spawn_request`, `await_request`, `cancel_request`), answered at once with a
 * handle, later with the spawned subtasks' statuses.
 */
import { z } from "zod";
import { Usage } from "./result.js";
import { ModelId } from "./ids.js";
import { ToolPattern } from "./tool-selection.js";

/**
 * What a task sets for its own session (`<tools>`, `max_turns`, `temperature`, `max_output_tokens`, `<model
 * fallback>`), over the Handler's defaults. Sent in `ExecuteRequest`, and kept in a suspended session's state so
 * that its resume, in any Handler, runs under the same settings.
 */
export const SessionSettings = z.object({
  /** The tools offered (names and globs); absent: the Handler's default (`DIRIGENT_TOOLS`); empty: none. */
  tools: z.array(ToolPattern).max(256).optional(),
  /** Hard limit on assistant messages, instead of the Handler's `DIRIGENT_MAX_TURNS`. */
  maxTurns: z.int().min(1).max(100).optional(),
  /** Sampling temperature sent with every model call. */
  temperature: z.number().min(0).max(2).optional(),
  /** Largest completion of one model call, instead of the Handler's `DIRIGENT_MAX_OUTPUT_TOKENS`. */
  maxOutputTokens: z.int().min(1).max(1_000_000).optional(),
  /** `<provider>`: the OpenAI-compatible server, by its name in the Handler's `DIRIGENT_PROVIDERS`. */
  provider: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,100}$/)
    .optional(),
  /** Models tried in order when the model is unavailable (not found, overloaded after the retries, unreachable). */
  fallbackModels: z.array(ModelId).max(8).optional(),
});
export type SessionSettings = z.infer<typeof SessionSettings>;

/** Context settings a subtask request imposes on its child (names as in `<context_management>`). */
export const ContextOverride = z.strictObject({
  inherit_context: z.enum(["full", "none", "subset"]).optional(),
  accumulate_data: z.boolean().optional(),
  accumulation_format: z.enum(["notes_only", "full_output"]).optional(),
  fresh_context: z.enum(["enabled", "disabled"]).optional(),
});
export type ContextOverride = z.infer<typeof ContextOverride>;

/** `notes.subtask_request`: spawn a child task and continue with its result. */
export const SubtaskRequest = z.strictObject({
  /** Task type of the child (`atomic`, `sequential`, …), used to choose its template. */
  type: z.string().min(1).max(64),
  /** Subtype of the child (`subtask`, `analysis`, …). */
  subtype: z.string().min(1).max(64).optional(),
  /** What the child must do; also the text its template is matched on. */
  description: z.string().min(1).max(64_000),
  /** Values bound in the child's environment. */
  inputs: z.record(z.string().regex(/^[A-Za-z_][\w-]*$/, "input names are identifiers"), z.unknown()).optional(),
  /** Template names or words that steer the choice of template. */
  template_hints: z.array(z.string().min(1).max(200)).max(10).optional(),
  /** Context settings for the child, over the subtask defaults. */
  context_management: ContextOverride.optional(),
  /** Deepest subtask nesting allowed below this point (default: the Evaluator's limit, 5). */
  max_depth: z.int().min(1).max(20).optional(),
  /** Workspace files the child gets as context; they take precedence over associative matching. */
  file_paths: z.array(z.string().min(1).max(1024)).max(100).optional(),
});
export type SubtaskRequest = z.infer<typeof SubtaskRequest>;

/** `notes.evaluation_request` (dynamic director–evaluator): a director asks for its output to be evaluated before it goes on. */
export const EvaluationRequest = z.strictObject({
  /** Kind of evaluation; `script`, `bash_script`, `test` and `run_script` run `target` first. */
  type: z.string().min(1).max(64),
  /** What the output must satisfy (a string or a list). */
  criteria: z.union([z.string().min(1).max(16_000), z.array(z.string().min(1).max(4_000)).min(1).max(50)]),
  /** What to evaluate: a script to run (argv text, split without a shell) or a file or artefact name. */
  target: z.string().min(1).max(4_000).optional(),
});
export type EvaluationRequest = z.infer<typeof EvaluationRequest>;

/** Evaluation types that run their `target` as a command before judging. */
export const SCRIPT_EVALUATION_TYPES: ReadonlySet<string> = new Set(["script", "bash_script", "test", "tests", "run_script"]);

const ToolCallMessage = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

/** A chat message of a suspended session (chat-completions shape). */
export const SessionMessage = z.union([
  z.object({ role: z.enum(["system", "user"]), content: z.string() }),
  z.object({ role: z.literal("assistant"), content: z.string().nullable(), tool_calls: z.array(ToolCallMessage).exactOptional() }),
  z.object({ role: z.literal("tool"), tool_call_id: z.string(), content: z.string() }),
]);
export type SessionMessage = z.infer<typeof SessionMessage>;

/** A Handler session suspended at a continuation tool call. */
export const SessionState = z.object({
  /** The conversation so far, up to and including the assistant message with the pending tool call. */
  messages: z.array(SessionMessage).min(2).max(10_000),
  /** The tool call the child's answer responds to. */
  toolCallId: z.string().min(1),
  /** Assistant turns used. */
  turns: z.int().nonnegative(),
  /** Tokens used so far. */
  usage: Usage,
  /** Context accounting so far. */
  context: z.object({ used: z.number().nonnegative(), limit: z.number().positive(), peak: z.number().nonnegative() }),
  /** Tokens the server reported for the last call (a floor for models the tokenizer does not know). */
  reportedTokens: z.number().nonnegative(),
  /** Whether the context warning was sent. */
  warned: z.boolean(),
  /** Malformed tool calls so far. */
  malformedToolCalls: z.int().nonnegative(),
  /** The model that answered. */
  model: z.string(),
  /** The task's own settings of the session, when it set any. */
  settings: SessionSettings.optional(),
});
export type SessionState = z.infer<typeof SessionState>;

/**
 * A session between model calls, with no continuation pending: what the Handler records right after the model
 * answers with tool calls (its messages then end with that answer) and again once those tools ran.
 */
export const SessionCheckpoint = SessionState.omit({ toolCallId: true });
export type SessionCheckpoint = z.infer<typeof SessionCheckpoint>;

/** `notes.input_request`: ask the user a question; the task waits for the answer on `<root>.tasks.<id>.input`. */
export const InputRequest = z.strictObject({
  /** The question, shown to the user in the task's events. */
  question: z.string().min(1).max(8_000),
  /** Longest wait for the answer, in seconds (capped by the Evaluator's limit). */
  timeout_s: z.number().positive().max(86_400).optional(),
});
export type InputRequest = z.infer<typeof InputRequest>;

/** A handle of a spawned subtask: `s1`, `s2`, … in the order the session spawned them. */
export const SpawnHandle = z.string().regex(/^s[1-9]\d{0,5}$/, "a handle is s1, s2, …");

/** `notes.await_request`: wait for spawned subtasks (default: every one not yet collected), at most `timeout_ms`. */
export const AwaitRequest = z.strictObject({
  /** The handles to wait for; absent: every spawned subtask whose result the session has not collected yet. */
  handles: z.array(SpawnHandle).max(100).optional(),
  /** Longest wait, in milliseconds; absent: until they settle. Subtasks still running then are reported `running`. */
  timeout_ms: z.int().nonnegative().max(86_400_000).optional(),
});
export type AwaitRequest = z.infer<typeof AwaitRequest>;

/** `notes.cancel_request`: cancel a running spawned subtask. */
export const CancelRequest = z.strictObject({
  /** The handle `spawn_subtask` answered with. */
  handle: SpawnHandle,
});
export type CancelRequest = z.infer<typeof CancelRequest>;

/**
 * Which continuation tools a session is offered: `subtask` (run_subtask), `spawn` (spawn_subtask, await_subtasks,
 * cancel_subtask), `evaluation` (request_evaluation), `input` (request_user_input).
 */
export const ContinuationKind = z.enum(["subtask", "spawn", "evaluation", "input"]);
export type ContinuationKind = z.infer<typeof ContinuationKind>;
