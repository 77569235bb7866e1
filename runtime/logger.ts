/** Structured logging with pino, to stderr. The API key is redacted wherever it might appear. */
import { pino, type Logger as PinoLogger } from "pino";
import type { Logger } from "../actors/deps.js";

/** Creates the process logger. */
export function createLogger(level: string, name: string): Logger & PinoLogger {
  return pino(
    {
      name,
      level,
      redact: { paths: ["apiKey", "openaiApiKey", "*.apiKey", "*.openaiApiKey", "headers.authorization"], censor: "[redacted]" },
    },
    pino.destination(2),
  );
}
