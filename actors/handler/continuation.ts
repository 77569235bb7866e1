/**
 * The continuation tools of a Handler session: `run_subtask` and `request_evaluation` (dynamic director–evaluator;
 * docs/task-language.md). They run nowhere in the Handler: a valid call suspends the session, which answers the
 * Evaluator `CONTINUATION`; the Evaluator runs the child and resumes the session with its answer.
 */
import { z } from "zod";
import type { PendingContinuation, ToolCall } from "../../machines/handler/session.js";
import { EvaluationRequest, InputRequest, SubtaskRequest, type ContinuationKind } from "../../protocol/index.js";
import type { ToolDefinition } from "./toolset.js";
import { messageOf } from "../../protocol/errors.js";

const TOOLS: Record<ContinuationKind, { name: string; description: string; schema: z.ZodType }> = {
  subtask: {
    name: "run_subtask",
    description:
      "Hand a self-contained part of the work to a subtask. It runs as its own task (with its own template and context) and its result comes back as this tool's response; then continue.",
    schema: SubtaskRequest,
  },
  evaluation: {
    name: "request_evaluation",
    description:
      "Ask for your current output to be evaluated against criteria (for a script or test `type`, `target` is run first). The evaluation comes back as this tool's response; then improve your output or finish.",
    schema: EvaluationRequest,
  },
  input: {
    name: "request_user_input",
    description:
      "Ask the user a question when you cannot go on without their answer. The task waits for the answer (or a timeout); it comes back as this tool's response.",
    schema: InputRequest,
  },
};

/** The names of the continuation tools: no other tool may take one. */
export const CONTINUATION_TOOL_NAMES: readonly string[] = Object.values(TOOLS).map((tool) => tool.name);

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
const DEFINITIONS: ReadonlyMap<ContinuationKind, ToolDefinition> = new Map(
  (Object.keys(TOOLS) as ContinuationKind[]).map((kind) => {
    const { $schema: _ignored, ...parameters } = z.toJSONSchema(TOOLS[kind].schema);
    return [
      kind,
      deepFreeze<ToolDefinition>({
        type: "function",
        function: { name: TOOLS[kind].name, description: TOOLS[kind].description, parameters },
      }),
    ];
  }),
);

/** Tool definitions of the continuation tools `kinds` (shared and frozen). */
export function continuationTools(kinds: readonly ContinuationKind[]): ToolDefinition[] {
  return [...new Set(kinds)].map((kind) => DEFINITIONS.get(kind) as ToolDefinition);
}

/**
 * Reads a tool call as a continuation request: `undefined` when it is not a continuation tool offered to the
 * session, `problem` when its arguments are malformed (answered to the model as an error), else the request.
 */
export function readContinuation(
  call: ToolCall,
  kinds: readonly ContinuationKind[],
): { continuation: PendingContinuation } | { problem: string } | undefined {
  const kind = kinds.find((k) => TOOLS[k].name === call.function.name);
  if (!kind) return undefined;
  let raw: unknown;
  try {
    raw = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
  } catch (err) {
    return { problem: `error: the arguments of '${call.function.name}' are not valid JSON (${messageOf(err)}); send a JSON object` };
  }
  const parsed = TOOLS[kind].schema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`).join("; ");
    return { problem: `error: invalid arguments for '${call.function.name}': ${problems}` };
  }
  return { continuation: { toolCallId: call.id, kind, request: parsed.data as Record<string, unknown> } };
}
