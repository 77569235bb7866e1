/**
 * NATS credentials of a process, from the configuration (flags and environment, never the repository): a user and
 * password (`NATS_USER` with `NATS_PASSWORD` or `NATS_PASSWORD_FILE`), a token (`NATS_TOKEN`), or a `.creds` file
 * (`NATS_CREDS`, for servers in operator mode). The secrets live in the returned object only; they are never logged.
 */
import { readFileSync } from "node:fs";
import { AuthorizationError } from "@nats-io/transport-node";
import { ConfigError, type Config } from "../config.js";
import { messageOf } from "../../protocol/errors.js";

/** What {@link connectNats} needs to authenticate. */
export interface NatsAuth {
  user?: string;
  pass?: string;
  token?: string;
  creds?: Uint8Array;
}

type AuthConfig = Pick<Config, "natsUser" | "natsPassword" | "natsPasswordFile" | "natsToken" | "natsCreds">;

function readSecret(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${what} '${file}' cannot be read: ${messageOf(err)}`);
  }
}

/**
 * The credentials the configuration names, reading the password and creds files.
 * @throws {ConfigError} when a file cannot be read, or a user has no password (or a password no user).
 */
export function natsAuth(config: AuthConfig): NatsAuth {
  const auth: NatsAuth = {};
  const pass =
    config.natsPasswordFile !== undefined
      ? (readSecret(config.natsPasswordFile, "NATS password file (--nats-password-file / NATS_PASSWORD_FILE)")
          .toString("utf8")
          .split(/\r?\n/)[0] ?? "")
      : config.natsPassword;
  if (config.natsUser !== undefined) {
    if (pass === undefined || pass === "")
      throw new ConfigError("NATS user given without a password: set NATS_PASSWORD or NATS_PASSWORD_FILE (--nats-password-file)");
    auth.user = config.natsUser;
    auth.pass = pass;
  } else if (pass !== undefined) {
    throw new ConfigError("NATS password given without a user: set NATS_USER (--nats-user)");
  }
  if (config.natsToken !== undefined) auth.token = config.natsToken;
  if (config.natsCreds !== undefined) auth.creds = readSecret(config.natsCreds, "NATS creds file (--nats-creds / NATS_CREDS)");
  return auth;
}

/** Whether `err` (or its cause) is the server refusing the credentials. */
export function isAuthorizationError(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if (e instanceof AuthorizationError || /authorization violation|authentication/i.test(e.message)) return true;
  }
  return false;
}

/** The error a process reports when the server refuses its credentials: names the server and where credentials come from. */
export function authorizationFailure(url: string, auth: NatsAuth | undefined, cause: unknown): Error {
  const given =
    auth?.user !== undefined
      ? `as user '${auth.user}'`
      : auth?.token !== undefined
        ? "with a token"
        : auth?.creds !== undefined
          ? "with a creds file"
          : "without credentials";
  return new Error(
    `NATS at ${url}: authorization violation: the server refused the connection ${given} ` +
      "(set NATS_USER with NATS_PASSWORD or NATS_PASSWORD_FILE, NATS_TOKEN, or NATS_CREDS; or --nats-user/--nats-password-file/--nats-creds)",
    { cause },
  );
}

/** Whether `err` (or its cause) is the server refusing a publish or subscription of this user. */
export function isPermissionViolation(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if (/permissions violation/i.test(e.message)) return true;
  }
  return false;
}

/** The error a process reports when its user lacks a permission its roles need. */
export function permissionFailure(url: string, auth: NatsAuth | undefined, roles: readonly string[] | undefined, cause: unknown): Error {
  const who = auth?.user !== undefined ? `user '${auth.user}'` : "this user";
  const what =
    roles === undefined ? "all roles" : roles.length === 0 ? "a client" : `the ${roles.join(", ")} role${roles.length > 1 ? "s" : ""}`;
  const message = messageOf(cause);
  // A role user may not create streams, buckets or consumers: a missing one is the admin step's to make.
  const hint = /\$JS\.API\.(STREAM|CONSUMER)\.CREATE\./.test(message)
    ? "a stream, bucket or consumer of this root is missing, and only its admin creates them: run 'dirigent nats-setup' " +
      "as the root's admin user (docs/deploy.md)"
    : `${who} lacks the permissions of ${what} (see 'dirigent nats-conf' and docs/deploy.md)`;
  return new Error(`NATS at ${url}: ${message}: ${hint}`, { cause });
}
