/**
 * `<output_format type="json" schema="…">` and `returns="…"`: JSON in a task's content is
 * parsed into the result's top-level `parsedContent`; content that looks like JSON but does not parse is noted in
 * `notes.parseError` (not a failure); a value whose type does not fit the declared schema fails the task with
 * `TASK_FAILURE / output_format_failure` and `details {expectedType, actualType}`.
 */
import { isSpace } from "../../protocol/fence.js";
import type { TaskResult } from "../../protocol/index.js";
import type { ReturnSpec, TaskNode } from "../../machines/language/ast.js";
import { messageOf } from "../../protocol/errors.js";

/** Type names a schema may check; any other name (`DataSet`, `any`, …) accepts every value. */
const CHECKED: ReadonlySet<string> = new Set(["string", "number", "integer", "boolean", "object", "array", "null"]);

const JSON_START = /^(?:[{[\d]|true\b|false\b|null\b)/;

/** The content with a surrounding ```json fence removed, trimmed. */
export function unfenced(content: string): string {
  const trimmed = content.trim();
  return (fenceBody(trimmed) ?? trimmed).trim();
}

/**
 * What /^```[ \t]*(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/i captures, by scanning: that expression backtracks
 * quadratically over "```" and a long run of blanks (20,000 took 1.7 s).
 */
function fenceBody(text: string): string | undefined {
  if (!text.startsWith("```") || !text.endsWith("```")) return undefined;
  const blanks = (from: number) => {
    let at = from;
    while (text[at] === " " || text[at] === "\t") at++;
    return at;
  };
  let at = blanks(3);
  if (text.slice(at, at + 4).toLowerCase() === "json") at = blanks(at + 4);
  if (text[at] === "\r" && text[at + 1] === "\n") at += 2;
  else if (text[at] === "\n") at += 1;
  else return undefined;
  let end = text.length - 3;
  if (end < at) return undefined;
  // The lazy body leaves the longest of "\r\n", "\n", "\r" before the closing fence to the fence.
  if (text[end - 1] === "\n" && end - 1 >= at) {
    end--;
    if (text[end - 1] === "\r" && end - 1 >= at) end--;
  } else if (text[end - 1] === "\r" && end - 1 >= at) end--;
  return text.slice(at, end);
}

/** Array nesting beyond which {@link jsonType} names a value just `array` (model output may nest without end). */
const TYPE_NAME_DEPTH = 32;

/** The JSON type name of a value: `string`, `number`, `boolean`, `null`, `object`, `array`, or `T[]` for a uniform array. */
export function jsonType(value: unknown, depth = 0): string {
  if (value === null) return "null";
  if (Array.isArray(value)) {
    if (depth >= TYPE_NAME_DEPTH) return "array";
    const kinds = new Set(value.map((item) => jsonType(item, depth + 1)));
    return kinds.size === 1 ? `${[...kinds][0] ?? ""}[]` : "array";
  }
  return typeof value === "object" ? "object" : typeof value;
}

function fitsName(name: string, value: unknown): boolean {
  switch (name) {
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "null":
      return value === null;
    default:
      return typeof value === name;
  }
}

/** Whether `value` fits the schema type `schema` (`string`, `object`, `string[]`, `number[][]`, …; unknown names fit anything). */
export function fitsSchema(schema: string, value: unknown): boolean {
  // Iterative: a schema of 50,000 "[]" and a value nested as deep must not overflow the stack.
  const lower = schema.trim().toLowerCase();
  let end = lower.length;
  let arrays = 0;
  while (end >= 2 && lower.endsWith("[]", end)) {
    end -= 2;
    while (end > 0 && isSpace(lower[end - 1])) end--;
    arrays++;
  }
  const name = lower.slice(0, end);
  const pending: [unknown, number][] = [[value, arrays]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, depth] = next;
    if (depth > 0) {
      if (!Array.isArray(item)) return false;
      for (const element of item) pending.push([element, depth - 1]);
    } else if (CHECKED.has(name) && !fitsName(name, item)) return false;
  }
  return true;
}

/** The declared expectation: parse as JSON, with an optional schema type to check. */
interface Expectation {
  json: boolean;
  schema?: string;
}

function expectation(node: TaskNode, returns: ReturnSpec | undefined): Expectation | undefined {
  const format = node.outputFormat;
  if (format?.type === "json") return { json: true, ...(format.schema ? { schema: format.schema } : {}) };
  const declared = node.returns ?? returns;
  if (!declared) return undefined;
  const type = declared.type.trim().toLowerCase();
  const schema = type === "array" && declared.items ? `${declared.items.trim()}[]` : type;
  if (schema === "string") return { json: false, schema };
  let end = schema.length;
  // A loop, not /(\[\])+$/: that backtracks quadratically over a long run of "[]" not at the end.
  while (end >= 2 && schema.endsWith("[]", end)) end -= 2;
  const base = schema.slice(0, end);
  if (!schema.endsWith("[]") && !CHECKED.has(base)) return undefined;
  return { json: true, schema };
}

function failed(result: TaskResult, expectedType: string, actualType: string): TaskResult {
  return {
    ...result,
    status: "FAILED",
    error: {
      type: "TASK_FAILURE",
      reason: "output_format_failure",
      message: `output is ${actualType}, expected ${expectedType}`,
      content: result.content,
      details: { expectedType, actualType },
    },
  };
}

/**
 * Applies the task's `<output_format>` (or a declared `returns` type: the node's own, else `returns` of the
 * function template whose body it is) to a COMPLETE result; any other result is returned as it is.
 */
export function applyOutputFormat(node: TaskNode, result: TaskResult, returns?: ReturnSpec): TaskResult {
  if (result.status !== "COMPLETE") return result;
  const expected = expectation(node, returns);
  if (!expected) return result;
  const text = unfenced(result.content);
  if (!expected.json || !JSON_START.test(text)) {
    // Not JSON: the value is the text itself.
    if (expected.schema && !fitsSchema(expected.schema, result.content)) return failed(result, expected.schema, "string");
    return result;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ...result, notes: { ...result.notes, parseError: messageOf(err) } };
  }
  // Text that merely looks like JSON (`42`, `true`) is still a fine string.
  if (expected.schema?.trim().toLowerCase() === "string" && typeof value !== "string") return { ...result, parsedContent: result.content };
  if (expected.schema && !fitsSchema(expected.schema, value)) return failed(result, expected.schema, jsonType(value));
  return { ...result, parsedContent: value };
}
