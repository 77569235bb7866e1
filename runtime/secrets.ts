/**
 * The secrets of a process kept out of reach of the programs it runs and masked where they could surface: the
 * values it knows (API key, NATS password and token, the password file's password, the creds file's JWT and seed),
 * the environment variables that carried them (removed once the configuration is loaded), and the files that hold
 * them (never mounted into the sandbox).
 */
import { closeSync, openSync, readFileSync, realpathSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import type { Config } from "./config.js";
import { ENV_NAMES } from "./config.js";
import { MIN_SECRET_LENGTH } from "../actors/secrets.js";
import { messageOf } from "../protocol/errors.js";

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

/**
 * Blanks, in this process's initial environment block, every variable named in `names` or whose value holds one of
 * `secrets`. That block is what `/proc/<pid>/environ` shows to every process of the same user (an MCP server the
 * Handler started, a program it runs unsandboxed), whatever `process.env` says later: deleting a variable only drops
 * the C library's pointer to it. A variable still set keeps its value for this process: it is set again first (the C
 * library copies it elsewhere). The block is written through `/proc/self/mem`, as `setproctitle` writes `argv`.
 * Harmless to call again.
 * @returns `undefined` once the block holds none of them, else why it still may (not Linux, `/proc` unreadable).
 */
export function blankInitialEnvironment(names: readonly string[], secrets: readonly string[]): string | undefined {
  if (process.platform !== "linux") return `the initial environment of a ${process.platform} process cannot be rewritten`;
  const values = secrets.filter((v) => v.length >= MIN_SECRET_LENGTH);
  const named = new Set(names);
  const holds = (entry: string) => {
    const eq = entry.indexOf("=");
    return eq > 0 && (named.has(entry.slice(0, eq)) || values.some((v) => entry.includes(v)));
  };
  let fd: number | undefined;
  try {
    // Fields 50 and 51 of /proc/self/stat (counted from 1): where the block starts and ends in this process's memory.
    const stat = readFileSync("/proc/self/stat", "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const start = Number(fields[50 - 3]);
    const block = readFileSync("/proc/self/environ");
    if (!Number.isSafeInteger(start) || start <= 0) return "/proc/self/stat gives no address of the environment";
    let at = 0;
    for (const raw of block.toString("latin1").split("\0")) {
      const entry = Buffer.from(raw, "latin1").toString("utf8");
      if (holds(entry)) {
        const name = entry.slice(0, entry.indexOf("="));
        const value = entry.slice(name.length + 1);
        if (process.env[name] === value) process.env[name] = value;
        fd ??= openSync("/proc/self/mem", "r+");
        const blank = Buffer.alloc(raw.length - name.length - 1);
        writeSync(fd, blank, 0, blank.length, start + at + name.length + 1);
      }
      at += raw.length + 1;
    }
    // A blanked variable's name stays, with no value.
    const left = readFileSync("/proc/self/environ", "utf8")
      .split("\0")
      .filter((entry) => holds(entry) && !entry.endsWith("="));
    return left.length === 0 ? undefined : `still there: ${left.map((e) => e.slice(0, e.indexOf("="))).join(", ")}`;
  } catch (err) {
    return `the initial environment cannot be rewritten: ${messageOf(err)}`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
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
