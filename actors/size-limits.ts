/**
 * Size limits of what the runtime accepts: a submission's body, one input value, a template. Beyond one of them the
 * answer is a `PAYLOAD_TOO_LARGE` error naming the limit, the actual size and the setting that raises it, and nothing
 * is stored. The runtime passes the configured limits in (`runtime/config.ts`); these are the defaults.
 */
import { errorReply, type ErrorReply, type TaskInputs } from "../protocol/index.js";

/** The limits, in bytes (UTF-8). */
export interface SizeLimits {
  /** Largest submission body (JSON or raw XML). */
  readonly submissionBytes: number;
  /** Largest value of one input: a string's UTF-8, the JSON of any other value. */
  readonly inputBytes: number;
  /** Largest template (UTF-8 of its XML). */
  readonly templateBytes: number;
}

/** 1 MiB each: the submission limit of `protocol/codec.ts` (`MAX_BODY_BYTES`); a template or an input is part of one. */
export const DEFAULT_SIZE_LIMITS: SizeLimits = { submissionBytes: 1_048_576, inputBytes: 1_048_576, templateBytes: 1_048_576 };

/** The environment variable of each limit (the same names as `runtime/config.ts` ENV_NAMES), for error messages. */
export const SIZE_SETTINGS = {
  submissionBytes: "DIRIGENT_MAX_SUBMISSION_BYTES",
  inputBytes: "DIRIGENT_MAX_INPUT_BYTES",
  templateBytes: "DIRIGENT_MAX_TEMPLATE_BYTES",
} as const satisfies Record<keyof SizeLimits, string>;

/** What exceeded which limit: the `details` of a `PAYLOAD_TOO_LARGE` reply. */
export interface TooLarge {
  /** What was too large: `submission`, `template`, `input '<name>'`. */
  readonly what: string;
  /** Its size in bytes. */
  readonly bytes: number;
  /** The limit in bytes. */
  readonly limit: number;
  /** The environment variable that sets the limit. */
  readonly setting: string;
}

/** The message of a {@link TooLarge}: `template of 2000000 bytes exceeds the limit of 1048576 bytes (DIRIGENT_MAX_TEMPLATE_BYTES)`. */
export function tooLargeMessage(t: TooLarge): string {
  return `${t.what} of ${t.bytes} bytes exceeds the limit of ${t.limit} bytes (${t.setting})`;
}

/** The `PAYLOAD_TOO_LARGE` reply of a {@link TooLarge}. */
export function tooLargeReply(t: TooLarge): ErrorReply {
  return errorReply("PAYLOAD_TOO_LARGE", tooLargeMessage(t), { details: t });
}

const encoder = new TextEncoder();

/** UTF-8 length of `text` when it may exceed `limit`; a text that cannot (three bytes per UTF-16 unit at most) is not encoded. */
function utf8Bytes(text: string, limit: number): number {
  return text.length * 3 <= limit ? text.length : encoder.encode(text).byteLength;
}

/** Checks a submission body's size. */
export function checkSubmission(bytes: number, limits: SizeLimits): TooLarge | undefined {
  return bytes > limits.submissionBytes
    ? { what: "submission", bytes, limit: limits.submissionBytes, setting: SIZE_SETTINGS.submissionBytes }
    : undefined;
}

/** Checks a template's size. */
export function checkTemplate(xml: string, limits: SizeLimits): TooLarge | undefined {
  const bytes = utf8Bytes(xml, limits.templateBytes);
  return bytes > limits.templateBytes
    ? { what: "template", bytes, limit: limits.templateBytes, setting: SIZE_SETTINGS.templateBytes }
    : undefined;
}

/** Checks the size of each input value; the first one too large. */
export function checkInputs(inputs: TaskInputs, limits: SizeLimits): TooLarge | undefined {
  for (const [name, value] of Object.entries(inputs)) {
    const bytes = typeof value === "string" ? utf8Bytes(value, limits.inputBytes) : encoder.encode(JSON.stringify(value) ?? "").byteLength;
    if (bytes > limits.inputBytes) return { what: `input '${name}'`, bytes, limit: limits.inputBytes, setting: SIZE_SETTINGS.inputBytes };
  }
  return undefined;
}
