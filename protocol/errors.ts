/**
 * Errors that cross the wire, and the errors the protocol layer itself raises.
 * Remote errors are always a {@link ErrorReply} with a `code`; branch on the code, never on a class.
 */
import { z } from "zod";

/** Every error code a public or internal subject may answer with. */
export const ErrorCode = z.enum([
  "INVALID_MESSAGE",
  "INVALID_TEMPLATE",
  "INVALID_ID",
  "PAYLOAD_TOO_LARGE",
  "NOT_FOUND",
  "EXPIRED",
  /** The request does not fit the target's state (a running task cannot be re-run). */
  "CONFLICT",
  "UNKNOWN_TYPE",
  "TIMEOUT",
  "NO_RESPONDERS",
  "UNAVAILABLE",
  "INTERNAL",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** The body of an error answer on any subject. */
export const ErrorBody = z.object({
  /** Machine-readable failure mode. */
  code: ErrorCode,
  /** Short human-readable explanation naming the offending value. */
  message: z.string(),
  /** 1-based line of an XML error, when the problem is in a template. */
  line: z.number().int().positive().optional(),
  /** 1-based column of an XML error, when the problem is in a template. */
  col: z.number().int().positive().optional(),
  /** Structured extra information (for example the JSON-pointer paths of schema issues). */
  details: z.unknown().optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

/** An error reply: `{"error": {...}}`. */
export const ErrorReply = z.object({ error: ErrorBody });
export type ErrorReply = z.infer<typeof ErrorReply>;

/** One schema violation, located by a JSON pointer into the message. */
export interface DecodeIssue {
  /** JSON pointer to the offending value, `""` for the whole message. */
  path: string;
  /** What is wrong there. */
  message: string;
}

/** Why a body could not be decoded. */
export type DecodeFailure = "too_large" | "too_deep" | "not_utf8" | "not_json" | "schema";

/** A message that is not JSON, or does not match its schema. */
export class DecodeError extends Error {
  override name = "DecodeError";
  constructor(
    message: string,
    /** Every issue found, with its location. */
    readonly issues: DecodeIssue[],
    /** Why the body was refused. */
    readonly kind: DecodeFailure,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A subject token that NATS would not accept or that would change the subject's meaning. */
export class InvalidSubjectError extends Error {
  override name = "InvalidSubjectError";
  constructor(
    message: string,
    /** The token that was refused. */
    readonly token: string,
  ) {
    super(message);
  }
}

/** Builds an error reply body. */
export function errorReply(code: ErrorCode, message: string, extra: Omit<ErrorBody, "code" | "message"> = {}): ErrorReply {
  return { error: { code, message, ...extra } };
}

/** The message of an unknown thrown value: an Error's message, anything else as a string. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
