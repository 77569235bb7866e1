/**
 * Deciding where the runtime runs: a given NATS URL, a server already answering on the default address,
 * a `nats-server` child process started for us, or (with no binary) the in-process bus.
 */
import { mkdirSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../../actors/deps.js";
import type { Subjects } from "../../protocol/index.js";
import { findNatsServer, startNatsServer, type NatsServerProcess } from "./server-process.js";
import { openMemoryTransport, openNatsTransport, type OpenTransport } from "../transport.js";
import { authorizationFailure, isAuthorizationError, isPermissionViolation, natsAuth, permissionFailure, type NatsAuth } from "./auth.js";
import type { Config } from "../config.js";
import type { RecordRetention } from "./store.js";

/** The NATS address tried when none is configured. */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

/** The repository's development server config, shipped with the package. */
export const PACKAGED_NATS_CONF = resolve(dirname(fileURLToPath(import.meta.url)), "../../../nats.conf");

/** A transport plus whatever was started to provide it. */
export interface Placement {
  transport: OpenTransport;
  /** The child nats-server, when one was started. */
  server?: NatsServerProcess;
  /** One line saying where the runtime runs, for people. */
  note: string;
  /** Closes the transport and stops the child server. */
  close(): Promise<void>;
}

/** Options of {@link place}. */
export interface PlaceOptions {
  /** Configured URL (`--nats` / `NATS_URL`); when set it must work. */
  url?: string;
  subjects: Subjects;
  log: Logger;
  /** Connection name. */
  name: string;
  /** Directory for a child server's data (`.dirigent`). */
  dataDir: string;
  /** Start a child nats-server when nothing answers (for `up`); otherwise fall back to in-process directly. */
  startServer: boolean;
  /** Credentials (see `natsAuth`); none by default. */
  auth?: NatsAuth;
  /** Roles this process runs: their stores are opened at once, others on first use; `[]` for a client. Default: all. */
  roles?: readonly string[];
  /** Reconnect attempts after a loss before the connection closes for good; -1 (default): forever. */
  maxReconnects?: number;
  /** Replicas of the streams and buckets created (`--replicas`); default 1. */
  replicas?: number;
  /** Scale existing streams with fewer replicas (`--scale-streams`). */
  scaleStreams?: boolean;
  /** Age and size limits of the turns bucket, when this process creates it. */
  records?: RecordRetention;
}

/** Opens a transport following the rules of `dirigent up` (see the README). */
export async function place(options: PlaceOptions): Promise<Placement> {
  const { subjects, log, name } = options;
  // A server that refuses the credentials is an error, never a reason to fall back.
  const open = (url: string) =>
    openNatsTransport(url, subjects, {
      name,
      log,
      ...(options.auth ? { auth: options.auth } : {}),
      ...(options.roles ? { roles: options.roles } : {}),
      ...(options.maxReconnects !== undefined ? { maxReconnects: options.maxReconnects } : {}),
      ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
      ...(options.scaleStreams !== undefined ? { scaleStreams: options.scaleStreams } : {}),
      ...(options.records ? { records: options.records } : {}),
    }).catch((err: unknown) =>
      Promise.reject(
        isAuthorizationError(err)
          ? authorizationFailure(url, options.auth, err)
          : isPermissionViolation(err)
            ? permissionFailure(url, options.auth, options.roles, err)
            : err,
      ),
    );
  if (options.url) {
    const transport = await open(options.url);
    return wrap(transport, `NATS at ${transport.description}`);
  }
  try {
    const transport = await open(DEFAULT_NATS_URL);
    return wrap(transport, `NATS at ${transport.description}`);
  } catch (err) {
    if (isAuthorizationError(err) || isPermissionViolation(err)) throw err;
    log.debug({ err: String(err) }, "no NATS server on the default address");
  }
  if (options.startServer) {
    const binary = findNatsServer();
    if (binary) {
      // nats.conf names a relative store_dir (.dirigent/jetstream) and 2.9 refuses -sd beside it: choose the
      // working directory so that the store lands inside the data directory.
      const dataDir = resolve(options.dataDir);
      const cwd = basename(dataDir) === ".dirigent" ? dirname(dataDir) : dataDir;
      mkdirSync(dataDir, { recursive: true });
      const server = await startNatsServer({ binary, configFile: PACKAGED_NATS_CONF, cwd, port: 4222, monitorPort: 0 });
      try {
        const transport = await open(server.url);
        return wrap(
          transport,
          `NATS at ${server.url} (nats-server started as a child, JetStream data in ${join(cwd, ".dirigent", "jetstream")})`,
          server,
        );
      } catch (err) {
        await server.stop();
        throw err;
      }
    }
  }
  return wrap(
    openMemoryTransport(log),
    "in-process bus (no NATS server reachable" +
      (options.startServer
        ? " and no nats-server binary: install it with 'apt-get install nats-server' for durability and multi-process use)"
        : ")"),
  );
}

function wrap(transport: OpenTransport, note: string, server?: NatsServerProcess): Placement {
  // A child server must not outlive this process, even when it exits on an uncaught error.
  const killChild = () => {
    if (server) {
      try {
        process.kill(server.pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
  };
  if (server) process.once("exit", killChild);
  return {
    transport,
    note,
    ...(server ? { server } : {}),
    async close() {
      await transport.close();
      await server?.stop();
      process.off("exit", killChild);
    },
  };
}

/**
 * Connects a client of the runtime (the CLI's commands, `dirigent mcp` and `a2a`): `--nats` / `NATS_URL` when set,
 * else the default address, else in-process; starts no server. `roles`: the roles this process runs itself (none).
 */
export function placeClient(
  config: Config,
  subjects: Subjects,
  log: Logger,
  name: string,
  roles: readonly string[] = [],
): Promise<Placement> {
  return place({
    ...(config.nats ? { url: config.nats } : {}),
    auth: natsAuth(config),
    replicas: config.replicas,
    scaleStreams: config.scaleStreams,
    roles,
    subjects,
    log,
    name,
    dataDir: config.dataDir,
    startServer: false,
  });
}
