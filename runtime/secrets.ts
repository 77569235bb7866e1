/**
 * The secrets of a process kept out of reach of the programs it runs and masked where they could surface: the
 * values it knows (API key, NATS password and token, the password file's password, the creds file's JWT and seed),
 * the environment variables that carried them (removed once the configuration is loaded), and the files that hold
 * them (never mounted into the sandbox).
 */
import { readFileSync, realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { Config } from "./config.js";
import { ENV_NAMES } from "./config.js";

type SecretConfig = Partial<Pick<Config, "openaiApiKey" | "natsPassword" | "natsToken" | "natsPasswordFile" | "natsCreds">>;

/** Variables holding secrets, removed from the process environment once the configuration is read. */
export const SECRET_ENV_NAMES = [ENV_NAMES.openaiApiKey, ENV_NAMES.natsPassword, ENV_NAMES.natsToken] as const;

/** The lines of a secret file, read at each call (a system's start, a logger's); none when it cannot be read (the connection then fails clearly). */
function linesOf(file: string): string[] {
  try {
    return readFileSync(file, "utf8").split(/\r?\n/);
  } catch {
    return [];
  }
}

/** Every secret value the configuration names: to mask wherever text leaves the process. */
export function secretValues(config: SecretConfig): string[] {
  const values = [config.openaiApiKey, config.natsPassword, config.natsToken];
  if (config.natsPasswordFile !== undefined) values.push(linesOf(config.natsPasswordFile)[0]);
  // A creds file holds a JWT and an NKey seed between its marker lines.
  if (config.natsCreds !== undefined)
    values.push(
      ...linesOf(config.natsCreds)
        .map((l) => l.trim())
        .filter((l) => l.length >= 16 && !/^[-*]|\s/.test(l)),
    );
  return [...new Set(values.filter((v): v is string => typeof v === "string" && v.trim() !== ""))];
}

/** Removes the secret variables from `env` (the process environment by default): no child can inherit them. */
export function scrubSecretEnv(env: NodeJS.ProcessEnv = process.env): void {
  for (const name of SECRET_ENV_NAMES) delete env[name];
}

/** Absolute real path of `path` (as given when it does not exist yet). */
function real(path: string): string {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    return absolute;
  }
}

/** Paths the sandbox must never show, even inside a bound directory: the secret files and the data directory. */
export function hiddenPaths(config: Partial<Pick<Config, "natsPasswordFile" | "natsCreds" | "dataDir">>): string[] {
  return [config.natsPasswordFile, config.natsCreds, config.dataDir].filter((p): p is string => p !== undefined).map(real);
}
