/**
 * Runtime configuration: command-line flags override environment variables, which override defaults.
 * Every value is validated here; a bad one is a {@link ConfigError} naming the flag or variable.
 * Secrets (the API key) are kept in the config object only and are never logged or sent.
 */
import { z } from "zod";
import { checkRoot, DEFAULT_ROOT } from "../protocol/index.js";

const positiveInt = z.coerce.number().int().positive();

/** The validated configuration. */
export const Config = z.object({
  /** NATS server URL(s); absent = decide at start (see `dirigent up`). */
  nats: z.string().optional(),
  /** Subject root. */
  prefix: z.string().refine((v) => { try { checkRoot(v); return true; } catch { return false; } }, "must be lowercase [a-z0-9_-] tokens separated by '.'"),
  /** Default model id. */
  model: z.string().min(1),
  /** OpenAI-compatible base URL. */
  openaiBaseUrl: z.url().optional(),
  /** API key; never logged. */
  openaiApiKey: z.string().optional(),
  /** Tasks (Director), evaluations (Evaluator), sessions (Handler) or matches (Memory) in flight per process. */
  concurrency: positiveInt,
  /** Longest time a task may run. */
  taskTimeoutMs: positiveInt,
  /** Hard limit on assistant turns per Handler session. */
  maxTurns: positiveInt,
  /** Timeout of one model HTTP request. */
  modelTimeoutMs: positiveInt,
  /** Retries of a model request (connection errors, 429, 5xx). */
  modelMaxRetries: z.coerce.number().int().min(0).max(10),
  /** Log level. */
  logLevel: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]),
  /** Directory for runtime data (a child nats-server's store). */
  dataDir: z.string().min(1),
  /** Base system prompt of every Handler session. */
  baseSystemPrompt: z.string(),
});
export type Config = z.infer<typeof Config>;

/** Defaults of every configurable value. */
export const DEFAULTS = {
  prefix: DEFAULT_ROOT,
  model: "gpt-4o-mini",
  concurrency: 64,
  taskTimeoutMs: 600_000,
  maxTurns: 10,
  modelTimeoutMs: 120_000,
  modelMaxRetries: 2,
  logLevel: "warn",
  dataDir: ".dirigent",
  baseSystemPrompt: "You are a careful assistant working on one task. Answer with the result only.",
} as const;

/** Environment variable of each key. */
export const ENV_NAMES = {
  nats: "NATS_URL",
  prefix: "DIRIGENT_PREFIX",
  model: "DIRIGENT_MODEL",
  openaiBaseUrl: "OPENAI_BASE_URL",
  openaiApiKey: "OPENAI_API_KEY",
  concurrency: "DIRIGENT_CONCURRENCY",
  taskTimeoutMs: "DIRIGENT_TASK_TIMEOUT_MS",
  maxTurns: "DIRIGENT_MAX_TURNS",
  modelTimeoutMs: "DIRIGENT_MODEL_TIMEOUT_MS",
  modelMaxRetries: "DIRIGENT_MODEL_MAX_RETRIES",
  logLevel: "DIRIGENT_LOG_LEVEL",
  dataDir: "DIRIGENT_DATA_DIR",
  baseSystemPrompt: "DIRIGENT_SYSTEM_PROMPT",
} as const satisfies Record<keyof Config, string>;

/** Command-line flag of each key (for error messages). */
const FLAG_NAMES: Partial<Record<keyof Config, string>> = {
  nats: "--nats",
  prefix: "--prefix",
  model: "--model",
  concurrency: "--concurrency",
  logLevel: "--log-level",
};

/** A configuration value is invalid. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Values given on the command line (strings as typed). */
export type Flags = Partial<Record<keyof Config, string | number | undefined>>;

/**
 * Builds the configuration from flags, environment and defaults.
 * @throws {ConfigError} naming each bad value and where it came from.
 */
export function loadConfig(flags: Flags = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = { ...DEFAULTS };
  const source: Record<string, string> = {};
  for (const key of Object.keys(ENV_NAMES) as Array<keyof Config>) {
    const fromEnv = env[ENV_NAMES[key]];
    if (fromEnv !== undefined && fromEnv !== "") {
      raw[key] = fromEnv;
      source[key] = `environment variable ${ENV_NAMES[key]}`;
    }
    const fromFlag = flags[key];
    if (fromFlag !== undefined) {
      raw[key] = fromFlag;
      source[key] = `flag ${FLAG_NAMES[key] ?? key}`;
    }
  }
  const parsed = Config.safeParse(raw);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const key = String(issue.path[0] ?? "");
    const shown = key === "openaiApiKey" ? "(hidden)" : `'${String(raw[key])}'`;
    return `${source[key] ?? key}: ${issue.message} (got ${shown})`;
  });
  throw new ConfigError(`invalid configuration: ${problems.join("; ")}`);
}
