/**
 * The one place bytes become messages and messages become bytes.
 * `decode` never throws on bad input: it returns a result, so the hot path stays exception-free.
 */
import type { z } from "zod";
import { DecodeError, type DecodeFailure, type DecodeIssue } from "./errors.js";
import { messageOf } from "./errors.js";

/** The largest message body any dirigent subject accepts (1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The deepest nesting of arrays and objects a JSON body may have. Deeper values would overflow the stack of the
 * recursive code that handles them later (`JSON.stringify` alone fails at a few thousand levels).
 */
export const MAX_JSON_DEPTH = 512;

const encoder = new TextEncoder();
/**
 * UTF-8 bytes of a string: Node's `Buffer.from` (a `Uint8Array`, small ones cut from a shared pool) takes a third of
 * the time of `TextEncoder.encode` for the small messages of the hot path; elsewhere the TextEncoder.
 */
const utf8: (text: string) => Uint8Array =
  typeof globalThis.Buffer === "function" ? (text) => globalThis.Buffer.from(text, "utf8") : (text) => encoder.encode(text);
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The result of decoding: the parsed value or the error that names every problem. */
export type Decoded<T> = { ok: true; value: T } | { ok: false; error: DecodeError };

/** Decodes UTF-8 JSON text, returning a {@link DecodeError} instead of throwing. */
export function decodeJson(bytes: Uint8Array, maxBytes = MAX_BODY_BYTES): Decoded<unknown> {
  if (bytes.byteLength > maxBytes) {
    return fail(`message of ${bytes.byteLength} bytes exceeds the limit of ${maxBytes} bytes`, [], "too_large");
  }
  // Cheap enough to run on every body: nesting deeper than the limit needs more bytes than the limit.
  if (bytes.byteLength > MAX_JSON_DEPTH && nestingExceeds(bytes, MAX_JSON_DEPTH)) {
    return fail(`message nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`, [], "too_deep");
  }
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (cause) {
    return fail("message is not valid UTF-8", [], "not_utf8", cause);
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (cause) {
    const reason = messageOf(cause);
    return fail(`message is not JSON: ${reason}`, [], "not_json", cause);
  }
}

/** Decodes bytes as JSON and validates them against `schema`. */
export function decode<S extends z.ZodType>(schema: S, bytes: Uint8Array, maxBytes?: number): Decoded<z.infer<S>> {
  const json = decodeJson(bytes, maxBytes);
  if (!json.ok) return json;
  return validate(schema, json.value);
}

/** Validates an already-parsed value against `schema`; a schema that throws (a stack overflow) is a refusal too. */
export function validate<S extends z.ZodType>(schema: S, value: unknown): Decoded<z.infer<S>> {
  let parsed: z.ZodSafeParseResult<z.infer<S>>;
  try {
    parsed = schema.safeParse(value);
  } catch (cause) {
    const reason = messageOf(cause);
    return fail(`invalid message: it could not be validated: ${reason}`, [], "schema", cause);
  }
  if (parsed.success) return { ok: true, value: parsed.data };
  const issues: DecodeIssue[] = parsed.error.issues.map((issue) => ({
    path: toPointer(issue.path),
    message: issue.message,
  }));
  const summary = issues.map((i) => `${i.path || "/"}: ${i.message}`).join("; ");
  return fail(`invalid message: ${summary}`, issues, "schema");
}

/** Encodes a value that the compiler has checked against the schema's type. */
export function encode<S extends z.ZodType>(_schema: S, value: z.infer<S>): Uint8Array {
  return utf8(JSON.stringify(value));
}

/** Encodes any JSON value (used for replies whose schema is a union chosen at the call site). */
export function encodeJson(value: unknown): Uint8Array {
  return utf8(JSON.stringify(value));
}

/** Decodes UTF-8 text. Invalid UTF-8 is replaced, never thrown. */
export function textOf(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

function fail(message: string, issues: DecodeIssue[], kind: DecodeFailure, cause?: unknown): { ok: false; error: DecodeError } {
  return { ok: false, error: new DecodeError(message, issues, kind, cause === undefined ? undefined : { cause }) };
}

/**
 * Whether JSON text nests arrays and objects deeper than `limit`, counting brackets outside strings. Run before
 * `JSON.parse`, it also works on text that is not JSON (then the parse names the problem).
 */
function nestingExceeds(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === 0x5c)
        i++; // a backslash escapes the next byte (\" and \\ included)
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > limit) return true;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return false;
}

function toPointer(path: ReadonlyArray<PropertyKey>): string {
  return path.map((p) => "/" + String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}
