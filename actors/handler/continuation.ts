/**
 * The continuation tools of a Handler session: `run_subtask`, `spawn_subtask` / `await_subtasks` / `cancel_subtask`,
 * `request_evaluation` (dynamic director–evaluator) and `request_user_input` (docs/task-language.md). They run
 * nowhere in the Handler: a valid call suspends the session, which answers the Evaluator `CONTINUATION` with the
 * request under the tool's note (`subtask_request`, `spawn_request`, …); the Evaluator acts on it and resumes the
 * session with its answer.
 */
import { z } from "zod";
import type { PendingContinuation, ToolCall } from "../../machines/handler/session.js";
import {
  AwaitRequest,
  CancelRequest,
  EvaluationRequest,
  InputRequest,
  SubtaskRequest,
  type ContinuationKind,
} from "../../protocol/index.js";
import type { ToolDefinition } from "./toolset.js";
import { messageOf } from "../../protocol/errors.js";

/** One continuation tool: its name, description, arguments, and the note its request travels under. */
interface ContinuationTool {
  name: string;
  description: string;
  schema: z.ZodType;
  note: string;
}

const TOOLS: Record<ContinuationKind, readonly ContinuationTool[]> = {
  subtask: [
    {
      name: "run_subtask",
      description:
        "Hand a self-contained part of the work to a subtask. It runs as its own task (with its own template and context) and its result comes back as this tool's response; then continue.",
      schema: SubtaskRequest,
      note: "subtask_request",
    },
  ],
  spawn: [
    {
      name: "spawn_subtask",
      description:
        'Start a subtask (same arguments as run_subtask) that runs while you keep working; the response is its handle, e.g. {"handle":"s1"}. Collect its result with await_subtasks. Subtasks not awaited when you finish are cancelled.',
      schema: SubtaskRequest,
      note: "spawn_request",
    },
    {
      name: "await_subtasks",
      description:
        "Wait for spawned subtasks (handles; default: all not yet collected) to finish, at most timeout_ms. The response maps each handle to {status: complete | failed | cancelled | running, content, error?}.",
      schema: AwaitRequest,
      note: "await_request",
    },
    {
      name: "cancel_subtask",
      description: "Cancel a running spawned subtask by its handle; the response is its status.",
      schema: CancelRequest,
      note: "cancel_request",
    },
  ],
  evaluation: [
    {
      name: "request_evaluation",
      description:
        "Ask for your current output to be evaluated against criteria (for a script or test `type`, `target` is run first). The evaluation comes back as this tool's response; then improve your output or finish.",
      schema: EvaluationRequest,
      note: "evaluation_request",
    },
  ],
  input: [
    {
      name: "request_user_input",
      description:
        "Ask the user a question when you cannot go on without their answer. The task waits for the answer (or a timeout); it comes back as this tool's response.",
      schema: InputRequest,
      note: "input_request",
    },
  ],
};

/** The names of the continuation tools: no other tool may take one. */
export const CONTINUATION_TOOL_NAMES: readonly string[] = Object.values(TOOLS).flatMap((tools) => tools.map((tool) => tool.name));

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * The definition of each continuation tool, its JSON Schema converted once when the module loads (the conversion cost
 * more than the rest of a session) and frozen: every session shares it, and nothing may change it.
 */
const DEFINITIONS: ReadonlyMap<ContinuationKind, readonly ToolDefinition[]> = new Map(
  (Object.keys(TOOLS) as ContinuationKind[]).map((kind) => [
    kind,
    TOOLS[kind].map((tool) => {
      const { $schema: _ignored, ...parameters } = z.toJSONSchema(tool.schema);
      return deepFreeze<ToolDefinition>({ type: "function", function: { name: tool.name, description: tool.description, parameters } });
    }),
  ]),
);

/** Tool definitions of the continuation tools `kinds` (shared and frozen). */
export function continuationTools(kinds: readonly ContinuationKind[]): ToolDefinition[] {
  return [...new Set(kinds)].flatMap((kind) => DEFINITIONS.get(kind) ?? []);
}

/**
 * Reads a tool call as a continuation request: `undefined` when it is not a continuation tool offered to the
 * session, `problem` when its arguments are malformed (answered to the model as an error), else the request.
 */
export function readContinuation(
  call: ToolCall,
  kinds: readonly ContinuationKind[],
): { continuation: PendingContinuation } | { problem: string } | undefined {
  const kind = kinds.find((k) => TOOLS[k].some((tool) => tool.name === call.function.name));
  const tool = kind && TOOLS[kind].find((t) => t.name === call.function.name);
  if (!kind || !tool) return undefined;
  let raw: unknown;
  try {
    raw = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
  } catch (err) {
    return { problem: `error: the arguments of '${call.function.name}' are not valid JSON (${messageOf(err)}); send a JSON object` };
  }
  const parsed = tool.schema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`).join("; ");
    return { problem: `error: invalid arguments for '${call.function.name}': ${problems}` };
  }
  return { continuation: { toolCallId: call.id, kind, note: tool.note, request: parsed.data as Record<string, unknown> } };
}
