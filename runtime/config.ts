/**
 * Runtime configuration: command-line flags override environment variables, which override defaults.
 * Every value is validated here; a bad one is a {@link ConfigError} naming the flag or variable.
 * Secrets (the API key, the NATS password and token) are kept in the config object only and are never logged or sent.
 */
import { z } from "zod";
import { checkRoot, DEFAULT_ROOT, MAX_BODY_BYTES, ToolPattern } from "../protocol/index.js";
import { ENV_NAMES, FLAG_NAMES } from "./config-names.js";
import { REFUSED_ENV } from "../actors/commands.js";
import { MAX_STORED_VALUE_BYTES } from "../actors/bus.js";
import { bool, json, list } from "./config-values.js";

export { ENV_NAMES };

const positiveInt = z.coerce.number().int().positive();
/** A size limit of a template or a tool's text: at most 1 MiB, the template parser's own ceiling. */
const sizeLimit = positiveInt.max(MAX_BODY_BYTES, `must be at most ${MAX_BODY_BYTES} (1 MiB, the template parser's ceiling)`);
/**
 * A size limit of a submission or an input: at most 64 MiB, the largest value the stores hold. A request between roles
 * larger than one NATS message travels by reference (runtime/nats/chunks.ts).
 */
const bodyLimit = positiveInt.max(MAX_STORED_VALUE_BYTES, `must be at most ${MAX_STORED_VALUE_BYTES} (64 MiB, the largest stored value)`);
/** Variable names that look like secrets: never an environment input of a template. */
const SECRET_LIKE = /KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION/i;
const fraction = z.coerce.number().gt(0).max(1);
/** `DIRIGENT_PROVIDERS`: `name=url` pairs, comma-separated (or an object of them: a config file, a test), as an object. */
const ProviderPairs = z.preprocess(
  (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? Object.entries(v).map(([name, url]) => `${name}=${String(url)}`) : v),
  list(
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,100}=\S+$/, "must be name=url pairs")
      .refine((p) => URL.canParse(p.slice(p.indexOf("=") + 1)), "must be name=url pairs with a valid URL"),
  ).transform((pairs) => Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)]))),
);
/** Per-1M-token prices of one model. */
const ModelPrice = z.strictObject({ input: z.number().nonnegative(), output: z.number().nonnegative() });

/** The validated configuration. */
export const Config = z.object({
  /** NATS server URL(s); absent = decide at start (see `dirigent up`). */
  nats: z.string().optional(),
  /** NATS user name, with a password (`natsPassword` or `natsPasswordFile`). */
  natsUser: z.string().min(1).optional(),
  /** NATS password; never logged. */
  natsPassword: z.string().min(1).optional(),
  /** File holding the NATS password (first line); preferred over `natsPassword` in production. */
  natsPasswordFile: z.string().min(1).optional(),
  /** NATS authentication token; never logged. */
  natsToken: z.string().min(1).optional(),
  /** A NATS `.creds` file (JWT and NKey seed; needs a server in operator mode). */
  natsCreds: z.string().min(1).optional(),
  /** Subject root. */
  prefix: z.string().refine((v) => {
    try {
      checkRoot(v);
      return true;
    } catch {
      return false;
    }
  }, "must be lowercase [a-z0-9_-] tokens separated by '.'"),
  /** Default model id. */
  model: z.string().min(1),
  /** OpenAI-compatible base URL. */
  openaiBaseUrl: z.url().optional(),
  /**
   * OpenAI-compatible servers a task names with `<provider>`, by name (runtime/model/providers.ts). Each uses the API
   * key in `DIRIGENT_PROVIDER_<NAME>_API_KEY` (name upper-cased, `-` and `.` as `_`), else `OPENAI_API_KEY`.
   */
  providers: ProviderPairs,
  /** API key; never logged. */
  openaiApiKey: z.string().optional(),
  /** Tasks (Director), evaluations (Evaluator), sessions (Handler) or matches (Memory) in flight per process. */
  concurrency: positiveInt,
  /**
   * Requests between roles of one process are calls, not NATS messages, while the asked role has a slot free
   * (actors/local.ts). Off: every request crosses NATS, as between processes.
   */
  localDispatch: bool,
  /** Longest time a task may run. */
  taskTimeoutMs: positiveInt,
  /** Intake redelivery: a task whose Director stops signalling progress this long is resumed by another Director. */
  ackWaitMs: positiveInt,
  /** Hard limit on assistant turns per Handler session. */
  maxTurns: positiveInt,
  /** Timeout of one model HTTP request. */
  modelTimeoutMs: positiveInt,
  /** Retries of a model request (connection errors, timeouts, 408, 409, 429, 5xx). */
  modelMaxRetries: z.coerce.number().int().min(0).max(20),
  /** Log level. */
  logLevel: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]),
  /** Directory for runtime data (a child nats-server's store). */
  dataDir: z.string().min(1),
  /** Base system prompt of every Handler session. */
  baseSystemPrompt: z.string(),
  /** Backoff before the first model retry (doubled per retry, full jitter). */
  modelRetryBaseMs: positiveInt,
  /** Cap of one wait between model retries, a server's retry-after included. */
  modelRetryMaxMs: positiveInt,
  /** Most time one model request spends waiting between its retries; a longer retry-after fails it at once. */
  modelRetryBudgetMs: positiveInt,
  /** The model client's HTTP: dirigent's own keep-alive HTTP/1.1 client (`http1`), keep-alive `node:http` (`node`) or Node's global `fetch` (`global`). */
  modelHttp: z.enum(["http1", "node", "global"]),
  /** Context window of models the tokenizer does not know (tokens). */
  contextWindowTokens: positiveInt,
  /** Share of a model's context window one Handler session may fill. */
  maxContextWindowFraction: fraction,
  /** Share of the context limit at which a `context.warning` event is sent. */
  warningThreshold: fraction,
  /** Malformed tool calls answered with an error before the session fails. */
  maxMalformedToolCalls: z.coerce.number().int().min(0).max(100),
  /** Largest completion of one model call, sent as `max_tokens`; 0 sends none (the server's own limit applies). */
  maxOutputTokens: z.coerce.number().int().min(0),
  /** Per-1M-token prices by model id (JSON), for the `cost` in usage notes. */
  modelPrices: json(z.record(z.string(), ModelPrice)),
  /** Directory the Handler's tools are confined to. */
  workspaceRoot: z.string().min(1),
  /**
   * Tools offered to a session whose task names none: names and globs (`read_file,fs__*`). A built-in tool exists
   * only when named here; a list of built-in names only offers every tool of the other sources too (docs/tools.md).
   */
  tools: list(ToolPattern),
  /** MCP servers whose tools the Handler offers: a JSON file `{"mcpServers": {...}}` (docs/tools.md). */
  mcpConfig: z.string().min(1).optional(),
  /** Default time one tool call (MCP, TypeScript) may take before it is answered with a timeout error. */
  toolTimeoutMs: positiveInt,
  /** `on`: the Handler offers the endpoints of NATS services found through `$SRV.INFO` as tools (docs/tools.md). */
  natsTools: z.enum(["off", "on"]),
  /** Interval of the re-discovery of NATS service tools (ms). */
  toolDiscoveryMs: positiveInt,
  /**
   * The NATS services' tools an operator allows (`weather/get_weather,calc/*`), each service asked by name (its own
   * NATS user answers `$SRV.INFO.<service>`); nothing else is offered (logged). Empty: all (a warning at start).
   */
  natsToolAllow: list(
    z.string().regex(/^[A-Za-z0-9_-]{1,64}\/(\*|[A-Za-z0-9_-]{1,64})$/, "must be <service>/<tool> or <service>/* (docs/tools.md)"),
  ),
  /** Default cap of one tool result (MCP, TypeScript) in bytes; a longer one is cut with a note. */
  toolResultMaxBytes: sizeLimit,
  /** Largest description of a tool (MCP, NATS, TypeScript) in bytes; a longer one is left out, logged. */
  toolDescriptionMaxBytes: sizeLimit,
  /** Largest JSON Schema of a tool's arguments (MCP, NATS, TypeScript) in bytes of JSON; a larger one is left out, logged. */
  toolSchemaMaxBytes: sizeLimit,
  /**
   * Programs that commands written in submitted templates may run (`script` tasks, `<script_execution>`,
   * `<file_paths source="command">`, `request_evaluation` targets): `argv[0]` must be exactly one of them (a name
   * found on the PATH, or an absolute path). Empty: template commands are off.
   */
  commands: list(z.string().regex(/^[^\s,]+$/, "must be program names or absolute paths")),
  /** `bwrap`: every program runs in a bubblewrap sandbox (refused when bwrap is missing); `unsandboxed`: without isolation. */
  sandbox: z.enum(["bwrap", "unsandboxed"]),
  /** Network of sandboxed programs: `off` (a network namespace of their own, no interfaces but loopback) or `on` (the host's). */
  sandboxNetwork: z.enum(["off", "on"]),
  /** Extra host paths bound read-only into the sandbox (absolute; a virtualenv, a toolchain under /opt). */
  sandboxReadOnly: list(z.string().regex(/^\//, "must be absolute paths")),
  /** Largest `read_file` answer in bytes. */
  readMaxBytes: positiveInt,
  /** Largest `list_files` answer in entries. */
  listMaxEntries: positiveInt,
  /** Timeout (and largest timeout a call or a `script` task may ask for) of `run_script`; 300 s by default, the default `<timeout>` of a `script` task. */
  scriptTimeoutMs: positiveInt,
  /** Time between SIGTERM and SIGKILL of a script's process group. */
  scriptKillGraceMs: positiveInt,
  /** Bytes kept of a script's stdout and of its stderr. */
  scriptOutputMaxBytes: positiveInt,
  /** Stream completions and publish assistant text as `model.delta` events. */
  streamDeltas: bool,
  /** `{{var}}` substitution by the Evaluator: `strict` fails on an unbound variable, `lenient` inserts `{{undefined:name}}`. */
  substitution: z.enum(["strict", "lenient"]),
  /**
   * Environment variables a template may read with `from="env:NAME"` (names); none by default. A name that looks like
   * a secret (`…KEY…`, `…SECRET…`, `…TOKEN…`, `…PASSWORD…`, `…CREDENTIAL…`) or names one of the runtime's is refused.
   */
  envInputs: list(
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be variable names")
      .refine((name) => !SECRET_LIKE.test(name) && !REFUSED_ENV.test(name), {
        error: (issue) => `'${String(issue.input)}' looks like a secret: a template never reads it`,
      }),
  ),
  /** Environment variables a script sees (names); secrets and variables that change which code runs never (runtime/tools/sandbox.ts). */
  scriptEnv: list(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be variable names")),
  /** Directory of the template library (`*.xml`, read recursively); a missing default directory is an empty library. */
  templates: z.string().trim().min(1, "must name a directory"),
  /** Deepest nesting of subtasks; a request's `max_depth` sets the limit below it. */
  maxSubtaskDepth: z.coerce.number().int().min(1).max(20),
  /** Handler calls (sessions, scripts) of one task running at once, over all its map branches, inputs and subtasks. */
  taskParallelism: z.coerce.number().int().min(1).max(10_000),
  /** Evaluations (`request_evaluation`) one director session may ask for. */
  maxEvaluations: z.coerce.number().int().min(1).max(50),
  /** Decompose an atomic task that ran out of a resource through the Compiler (reparse), at most 3 times per node. */
  reparse: bool,
  /**
   * Continuation tools offered to atomic sessions: `subtask` (run_subtask), `spawn` (spawn_subtask, await_subtasks,
   * cancel_subtask) and `input` (request_user_input). Their definitions cost about 300 (subtask), 500 (spawn) and
   * 110 (input) prompt tokens per model call, so `spawn` is not offered by default; an empty list offers none.
   */
  continuationTools: list(z.enum(["subtask", "spawn", "input"])),
  /** Function templates of the library offered to atomic sessions as tools (docs/tools.md); none by default. */
  templateTools: list(z.string().min(1)),
  /** Longest a task waits for the answer to `request_user_input` (a question may ask for less). */
  inputTimeoutMs: positiveInt,
  /** Memory lets the model choose among MiniSearch's best candidates (`--llm-match`); falls back to MiniSearch. */
  llmMatch: bool,
  /** Publish XState inspection messages of every actor on `<root>.inspect.>` (`dirigent inspect` shows them). */
  inspect: bool,
  /** Most inspection messages per second per process; beyond it events are dropped and snapshots coalesced. */
  inspectMaxPerSec: positiveInt,
  /** Share of tasks inspected (chosen by task id, the same in every process); 1 = all. */
  inspectSample: fraction,
  /** Goal cycles one Supervisor process runs at once. */
  supervisorMaxGoals: positiveInt,
  /** Pause between two goal-cycle starts of one Supervisor. */
  supervisorStaggerMs: z.coerce.number().int().nonnegative(),
  /** Supervisor reconciliation tick: start cycles for active goals, stop those no longer active. */
  supervisorTickMs: positiveInt,
  /** How long a Supervisor's hold on a goal lasts unless renewed (its goals move after it dies). */
  goalLeaseMs: positiveInt,
  /** Sub-goals of one goal that run at once. */
  goalMaxParallel: positiveInt,
  /** A goal's cost over 24 h (in the price table's unit, USD) that counts as a major divergence. */
  goalCostThreshold: z.coerce.number().nonnegative(),
  /** Replans before a goal is paused and an operator alerted. */
  goalMaxReplans: z.coerce.number().int().min(0).max(100),
  /** Longest a sub-goal's task may run before it counts as failed. */
  goalSubtaskTimeoutMs: positiveInt,
  /** How long the turns bucket keeps a record (sessions, tool calls, node records) when the runtime creates it. */
  recordsMaxAgeMs: positiveInt,
  /** Most bytes the turns bucket holds when the runtime creates it (the oldest records go first); 0: no limit. */
  recordsMaxBytes: z.coerce.number().int().min(0),
  /** Replicas of every JetStream stream and KV bucket the runtime creates: 1, 3 or 5 (a cluster of at least as many nodes). */
  replicas: z.coerce.number().pipe(z.union([z.literal(1), z.literal(3), z.literal(5)], { error: "must be 1, 3 or 5" })),
  /** Scale an existing stream or bucket with fewer replicas up to `replicas` at start (needs a user allowed to edit streams). */
  scaleStreams: bool,
  /** Reconnect attempts after losing the NATS server before a runtime process exits (1); -1: reconnect forever. */
  natsMaxReconnects: z.coerce.number().int().min(-1),
  /** How often a runtime process pings itself through NATS to check that its subscriptions still reach it; 0: only after a reconnect. */
  selfCheckMs: z.coerce.number().int().min(0),
  /** Port of the Prometheus metrics endpoint (`/metrics`) of a runtime process; absent: no endpoint (0: any free port). */
  metricsPort: z.coerce.number().int().min(0).max(65_535).optional(),
  /** Address the metrics endpoint listens on (loopback unless told otherwise). */
  metricsHost: z.string().trim().min(1),
  /** Cheap-tier model of divergence judgements and replan reviews; the default model when absent. */
  cheapModel: z.string().trim().min(1).optional(),
  /** URL that operator alerts are also POSTed to (JSON). */
  alertWebhook: z.url({ protocol: /^https?$/ }).optional(),
  /** Largest submission body in bytes (JSON or raw XML); beyond it the submit reply is `PAYLOAD_TOO_LARGE`. */
  maxSubmissionBytes: bodyLimit,
  /** Largest value of one input in bytes (UTF-8 of a string, of the JSON of any other value). */
  maxInputBytes: bodyLimit,
  /** Largest submitted template in bytes of UTF-8 XML (a template compiled from a prompt is not checked). */
  maxTemplateBytes: sizeLimit,
});
export type Config = z.infer<typeof Config>;

/** Every key of the configuration has an environment variable (runtime/config-names.ts), and every variable a key. */
const NAMES: Readonly<Record<keyof Config, string>> & Record<Exclude<keyof typeof ENV_NAMES, keyof Config>, never> = ENV_NAMES;

/** Defaults of every configurable value. */
export const DEFAULTS = {
  prefix: DEFAULT_ROOT,
  model: "gpt-4o-mini",
  concurrency: 64,
  localDispatch: true,
  taskTimeoutMs: 600_000,
  ackWaitMs: 30_000,
  maxTurns: 10,
  modelTimeoutMs: 120_000,
  modelMaxRetries: 5,
  logLevel: "warn",
  dataDir: ".dirigent",
  baseSystemPrompt: "You are a careful assistant working on one task. Answer with the result only.",
  modelRetryBaseMs: 500,
  modelRetryMaxMs: 30_000,
  modelRetryBudgetMs: 60_000,
  modelHttp: "http1",
  contextWindowTokens: 128_000,
  maxContextWindowFraction: 0.8,
  warningThreshold: 0.8,
  maxMalformedToolCalls: 3,
  maxOutputTokens: 0,
  modelPrices: {},
  workspaceRoot: ".",
  tools: ["read_file", "list_files"],
  toolTimeoutMs: 60_000,
  natsTools: "off",
  toolDiscoveryMs: 30_000,
  natsToolAllow: [],
  toolResultMaxBytes: 65_536,
  toolDescriptionMaxBytes: 4096,
  toolSchemaMaxBytes: 16_384,
  commands: [],
  sandbox: "bwrap",
  sandboxNetwork: "off",
  sandboxReadOnly: [],
  readMaxBytes: 262_144,
  listMaxEntries: 1000,
  scriptTimeoutMs: 300_000,
  scriptKillGraceMs: 2000,
  scriptOutputMaxBytes: 65_536,
  scriptEnv: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"],
  envInputs: [],
  providers: {},
  templates: "templates",
  maxSubtaskDepth: 5,
  taskParallelism: 64,
  maxEvaluations: 5,
  continuationTools: ["subtask", "input"],
  templateTools: [],
  inputTimeoutMs: 600_000,
  reparse: true,
  streamDeltas: false,
  substitution: "strict",
  llmMatch: false,
  inspect: false,
  inspectMaxPerSec: 2000,
  inspectSample: 1,
  supervisorMaxGoals: 5,
  supervisorStaggerMs: 2_000,
  supervisorTickMs: 10_000,
  goalLeaseMs: 30_000,
  goalMaxParallel: 3,
  goalCostThreshold: 5,
  goalMaxReplans: 5,
  goalSubtaskTimeoutMs: 1_800_000,
  natsMaxReconnects: -1,
  recordsMaxAgeMs: 7 * 24 * 60 * 60 * 1000,
  recordsMaxBytes: 0,
  replicas: 1,
  scaleStreams: false,
  selfCheckMs: 15_000,
  metricsHost: "127.0.0.1",
  // 1 MiB each by default; a submission's and an input's can be raised (up to 64 MiB), a template's cannot.
  maxSubmissionBytes: 1_048_576,
  maxInputBytes: 1_048_576,
  maxTemplateBytes: 1_048_576,
} as const;

/** The configuration keys whose values are secrets: hidden in errors, masked in inspection messages. */
export const SECRET_CONFIG_KEYS = ["openaiApiKey", "natsPassword", "natsToken"] as const satisfies ReadonlyArray<keyof Config>;
const SECRET_KEYS: ReadonlySet<string> = new Set(SECRET_CONFIG_KEYS);

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
  for (const key of Object.keys(NAMES) as Array<keyof Config>) {
    const fromEnv = env[NAMES[key]];
    if (fromEnv !== undefined && fromEnv !== "") {
      raw[key] = fromEnv;
      source[key] = `environment variable ${NAMES[key]}`;
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
    const shown = SECRET_KEYS.has(key) ? "(hidden)" : `'${String(raw[key])}'`;
    return `${source[key] ?? key}: ${issue.message} (got ${shown})`;
  });
  throw new ConfigError(`invalid configuration: ${problems.join("; ")}`);
}

/**
 * The intake ack wait from `DIRIGENT_ACK_WAIT_MS` (default 30 s), for code that opens a transport without a full
 * configuration.
 * @throws {ConfigError} when the value is not a positive integer.
 */
export function ackWaitMsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return loadConfig({}, { [ENV_NAMES.ackWaitMs]: env[ENV_NAMES.ackWaitMs] }).ackWaitMs;
}

/**
 * The size limits from `DIRIGENT_MAX_SUBMISSION_BYTES`, `DIRIGENT_MAX_INPUT_BYTES` and `DIRIGENT_MAX_TEMPLATE_BYTES`
 * (1 MiB each by default), for the CLI's checks before it sends anything.
 * @throws {ConfigError} when a value is not a positive integer.
 */
export function sizeLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): {
  submissionBytes: number;
  inputBytes: number;
  templateBytes: number;
} {
  const keys = ["maxSubmissionBytes", "maxInputBytes", "maxTemplateBytes"] as const;
  const config = loadConfig({}, Object.fromEntries(keys.map((k) => [ENV_NAMES[k], env[ENV_NAMES[k]]])));
  return { submissionBytes: config.maxSubmissionBytes, inputBytes: config.maxInputBytes, templateBytes: config.maxTemplateBytes };
}
