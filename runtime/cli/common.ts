/** Helpers shared by the CLI commands. */
import { readFile } from "node:fs/promises";
import { Option, type Command } from "commander";
import { createSubjects } from "../../protocol/index.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { checkInputs, checkTemplate, tooLargeMessage, type SizeLimits } from "../../actors/size-limits.js";
import { loadConfig, sizeLimitsFromEnv, type Config, type Flags } from "../config.js";
import { createLogger } from "../logger.js";
import { blankInitialEnvironment, scrubSecretEnv, SECRET_ENV_NAMES, secretValues } from "../secrets.js";
import { providerKeys } from "../model/providers.js";
import { messageOf } from "../../protocol/errors.js";

/** A usage error: exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Adds the options every command that touches the runtime accepts. */
export function commonOptions(command: Command): Command {
  return command
    .addOption(new Option("--nats <url>", "NATS server URL (env NATS_URL)"))
    .addOption(new Option("--nats-user <name>", "NATS user, with a password from NATS_PASSWORD or --nats-password-file (env NATS_USER)"))
    .addOption(new Option("--nats-password-file <file>", "file holding the NATS password (env NATS_PASSWORD_FILE)"))
    .addOption(new Option("--nats-creds <file>", "NATS .creds file, for servers in operator mode (env NATS_CREDS)"))
    .addOption(new Option("--prefix <root>", "subject root (env DIRIGENT_PREFIX, default 'dirigent')"))
    .addOption(new Option("--log-level <level>", "trace|debug|info|warn|error|silent (env DIRIGENT_LOG_LEVEL, default 'warn')"))
    .addOption(
      new Option(
        "--substitution <mode>",
        "strict|lenient {{var}} substitution of an Evaluator run here (env DIRIGENT_SUBSTITUTION, default 'strict')",
      ),
    )
    .addOption(
      new Option("--templates <dir>", "template library directory of an Evaluator run here (env DIRIGENT_TEMPLATES, default 'templates')"),
    )
    .addOption(
      new Option("--mcp-config <file>", "MCP servers whose tools a Handler run here offers (env DIRIGENT_MCP_CONFIG; docs/tools.md)"),
    )
    .addOption(new Option("--llm-match", "a Memory role run here lets the model choose among the best matches (env DIRIGENT_LLM_MATCH)"))
    .addOption(new Option("--replicas <n>", "replicas of the streams and buckets created: 1, 3 or 5 (env DIRIGENT_REPLICAS, default 1)"))
    .addOption(new Option("--scale-streams", "scale existing streams with fewer replicas up to --replicas (env DIRIGENT_SCALE_STREAMS)"));
}

/** Options parsed by commander that map onto config keys. */
export interface CommonFlags {
  nats?: string;
  natsUser?: string;
  natsPasswordFile?: string;
  natsCreds?: string;
  prefix?: string;
  logLevel?: string;
  concurrency?: string;
  model?: string;
  substitution?: string;
  templates?: string;
  mcpConfig?: string;
  llmMatch?: boolean;
  metricsPort?: string;
  replicas?: string;
  scaleStreams?: boolean;
}

/** Config, subjects and logger from command-line flags and the environment. */
export function setup(flags: CommonFlags, name: string) {
  const configFlags: Flags = {
    nats: flags.nats,
    natsUser: flags.natsUser,
    natsPasswordFile: flags.natsPasswordFile,
    natsCreds: flags.natsCreds,
    prefix: flags.prefix,
    logLevel: flags.logLevel,
    concurrency: flags.concurrency,
    model: flags.model,
    substitution: flags.substitution,
    templates: flags.templates,
    mcpConfig: flags.mcpConfig,
    llmMatch: flags.llmMatch === true ? "true" : undefined,
    metricsPort: flags.metricsPort,
    replicas: flags.replicas,
    scaleStreams: flags.scaleStreams === true ? "true" : undefined,
  };
  const config: Config = loadConfig(configFlags);
  // The configuration holds the secrets now; no child process inherits them from the environment, and no process of
  // the same user reads them in this one's /proc/<pid>/environ.
  scrubSecretEnv();
  const secrets = [...secretValues(config), ...providerKeys(config)];
  const kept = blankInitialEnvironment(SECRET_ENV_NAMES, secrets);
  const subjects = createSubjects(config.prefix);
  const log = createLogger(config.logLevel, name, secrets);
  if (kept !== undefined) {
    const said = `secrets may be readable in this process's initial environment: ${kept}`;
    // Elsewhere than on Linux that is the rule (docs/handler.md says what to do), not news worth a warning per command.
    if (process.platform === "linux") log.warn({}, said);
    else log.debug({}, said);
  }
  return { config, subjects, log };
}

/**
 * Parses repeated `--input key=value` flags. Values that are valid JSON (numbers, arrays, …) are parsed. A value over
 * the input size limit (`DIRIGENT_MAX_INPUT_BYTES`) is a usage error.
 */
export function parseInputs(pairs: readonly string[], limits: SizeLimits = sizeLimitsFromEnv()): Record<string, unknown> {
  const inputs: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--input '${pair}': expected key=value`);
    const key = pair.slice(0, eq);
    const raw = pair.slice(eq + 1);
    let value: unknown = raw;
    if (/^[[{"\d-]|^(true|false|null)$/.test(raw)) {
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
    }
    inputs[key] = value;
  }
  const tooLarge = checkInputs(inputs, limits);
  if (tooLarge) throw new UsageError(`--input: PAYLOAD_TOO_LARGE: ${tooLargeMessage(tooLarge)}`);
  return inputs;
}

/** Collects a repeated option into an array. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/**
 * Reads and validates a template file; an invalid one is a usage error naming file, line and column, one over the
 * template size limit (`DIRIGENT_MAX_TEMPLATE_BYTES`) one naming limit and size.
 */
export async function readTemplate(file: string, limits: SizeLimits = sizeLimitsFromEnv()): Promise<string> {
  let xml: string;
  try {
    xml = await readFile(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read '${file}': ${messageOf(err)}`);
  }
  const tooLarge = checkTemplate(xml, limits);
  if (tooLarge) throw new UsageError(`${file}: PAYLOAD_TOO_LARGE: ${tooLargeMessage(tooLarge)}`);
  const parsed = parseTemplate(xml);
  if (!parsed.ok) {
    const at = parsed.error.line ? `:${parsed.error.line}:${parsed.error.col ?? 1}` : "";
    throw new UsageError(`${file}${at}: INVALID_TEMPLATE: ${parsed.error.message}`);
  }
  if (!parsed.document.entry) throw new UsageError(`${file}: INVALID_TEMPLATE: the template defines no task to run`);
  return xml;
}

/**
 * Resolves on SIGINT or SIGTERM. Call it before printing the line that says the process is ready: whoever reads that
 * line may signal at once, and a signal that comes before the listener kills the process instead of draining it.
 */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(signal);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}
