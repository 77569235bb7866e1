/**
 * Library templates as tools of a session, so a model can ask for a known, tested piece of work by name: the Evaluator names them in the execute
 * request ({@link TemplateTool}); the model calls one by name with the template's parameters; a valid call suspends the
 * session like `run_subtask` does, with a `subtask_request` whose `template_hints` name the template exactly, so the
 * Evaluator runs that template as a subtask and resumes the session with its result.
 */
import type { PendingContinuation, ToolCall } from "../../machines/handler/session.js";
import type { SubtaskRequest, TemplateTool, TemplateToolParam } from "../../protocol/index.js";
import { messageOf } from "../../protocol/errors.js";
import type { ToolDefinition } from "./toolset.js";

const JSON_TYPES: Readonly<Record<string, string>> = {
  string: "string",
  integer: "integer",
  number: "number",
  boolean: "boolean",
  array: "array",
  object: "object",
};

/** The chat-completions definition of a template tool: its JSON Schema built from the declared parameters. */
export function templateToolDefinition(tool: TemplateTool): ToolDefinition {
  const properties: Record<string, unknown> = {};
  for (const param of tool.params) {
    const type = param.type === undefined ? undefined : JSON_TYPES[param.type];
    properties[param.name] = {
      ...(type ? { type } : {}),
      ...(param.description ? { description: param.description } : {}),
    };
  }
  const required = tool.params.filter((p) => p.required).map((p) => p.name);
  return {
    type: "function",
    function: {
      name: tool.name,
      description: tool.description,
      parameters: { type: "object", properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false },
    },
  };
}

function typeProblem(param: TemplateToolParam, value: unknown): string | undefined {
  const type = param.type === undefined ? undefined : JSON_TYPES[param.type];
  if (type === undefined) return undefined;
  const ok =
    type === "integer"
      ? Number.isInteger(value)
      : type === "array"
        ? Array.isArray(value)
        : type === "object"
          ? typeof value === "object" && value !== null && !Array.isArray(value)
          : typeof value === type;
  return ok ? undefined : `${param.name}: expected ${type}`;
}

/**
 * Reads a tool call as a call of a template tool: `undefined` when it names none of `tools`, `problem` when its
 * arguments do not fit the template's parameters (answered to the model as an error), else the continuation.
 */
export function readTemplateCall(
  call: ToolCall,
  tools: readonly TemplateTool[],
): { continuation: PendingContinuation } | { problem: string } | undefined {
  const tool = tools.find((t) => t.name === call.function.name);
  if (!tool) return undefined;
  const name = call.function.name;
  let raw: unknown;
  try {
    raw = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
  } catch (err) {
    return { problem: `error: the arguments of '${name}' are not valid JSON (${messageOf(err)}); send a JSON object` };
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return { problem: `error: invalid arguments for '${name}': (arguments): expected an object` };
  const args = raw as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(args)) if (!tool.params.some((p) => p.name === key)) problems.push(`${key}: not a parameter of '${name}'`);
  for (const param of tool.params) {
    if (!Object.hasOwn(args, param.name)) {
      if (param.required) problems.push(`${param.name}: required`);
      continue;
    }
    const problem = typeProblem(param, args[param.name]);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) return { problem: `error: invalid arguments for '${name}': ${problems.join("; ")}` };
  const request: SubtaskRequest = {
    type: "atomic",
    description: `library template '${tool.name}' called as a tool`,
    ...(Object.keys(args).length > 0 ? { inputs: args } : {}),
    template_hints: [tool.name],
  };
  return { continuation: { toolCallId: call.id, kind: "subtask", note: "subtask_request", request } };
}

/** Names of `tools` that another tool of the session already has (`taken`): a collision refused with the task. */
export function templateToolCollisions(tools: readonly TemplateTool[], taken: readonly string[]): string[] {
  return tools.map((t) => t.name).filter((name, i, all) => taken.includes(name) || all.indexOf(name) !== i);
}
