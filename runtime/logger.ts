/**
 * Structured logging with pino, to stderr. The API key is redacted wherever it might appear, and every known secret
 * value (API key, NATS password and token) is masked in messages and logged fields.
 */
import { pino, type DestinationStream, type Logger as PinoLogger } from "pino";
import type { Logger } from "../actors/deps.js";
import { createMasker, maskDeep } from "../actors/secrets.js";

/** Creates the process logger; `secrets` are masked as `[redacted]` in every line. Writes to stderr unless given `destination`. */
export function createLogger(
  level: string,
  name: string,
  secrets: readonly string[] = [],
  destination: DestinationStream = pino.destination(2),
): Logger & PinoLogger {
  const mask = createMasker(secrets);
  const masking = secrets.length > 0;
  return pino(
    {
      name,
      level,
      redact: { paths: ["apiKey", "openaiApiKey", "*.apiKey", "*.openaiApiKey", "headers.authorization"], censor: "[redacted]" },
      ...(masking
        ? {
            formatters: { log: (object: Record<string, unknown>) => maskDeep(errorsAsText(object), mask) },
            hooks: {
              logMethod(args: unknown[], method: (...a: unknown[]) => void) {
                method.apply(
                  this,
                  args.map((a) => (typeof a === "string" ? mask(a) : a)),
                );
              },
            },
          }
        : {}),
    },
    destination,
  );
}

/** Logged errors as plain objects, so their message and stack are masked too. */
function errorsAsText(object: Record<string, unknown>): Record<string, unknown> {
  let out = object;
  for (const [key, value] of Object.entries(object)) {
    if (value instanceof Error) out = { ...out, [key]: { type: value.name, message: value.message, stack: value.stack } };
  }
  return out;
}
