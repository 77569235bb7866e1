/**
 * Starts and stops a `nats-server` child process: the development server of `dirigent up` and the
 * per-file server of the integration tests. A small form of nats.js's `nst` launcher: spawn, wait
 * for the ports file (racing an early exit), check the port accepts connections, stop by pid.
 */
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { messageOf } from "../../protocol/errors.js";

const BINARY = "nats-server";
/** Where Debian and manual installs put the binary, which a non-root PATH may lack. */
const EXTRA_DIRS = ["/usr/sbin", "/usr/local/bin"];
const STDERR_LIMIT = 200 * 1024;
const MESSAGE_STDERR_LIMIT = 4 * 1024;
const POLL_MS = 20;

/** The `nats-server` binary could not be executed because it does not exist. */
export class NatsServerNotFoundError extends Error {
  override name = "NatsServerNotFoundError";
  constructor(
    /** The binary that was looked up. */
    readonly binary: string,
    options?: ErrorOptions,
  ) {
    super(
      `'${binary}' not found on PATH (nor in ${EXTRA_DIRS.join(", ")}): ` +
        "install the Debian package 'nats-server' (apt-get install nats-server) or pass the binary's path",
      options,
    );
  }
}

/** The server exited or did not become reachable while starting; `stderr` holds its last output. */
export class NatsServerStartError extends Error {
  override name = "NatsServerStartError";
  constructor(
    message: string,
    /** The tail of the server's stderr (its log). */
    readonly stderr: string,
    options?: ErrorOptions,
  ) {
    // The message shows the end of the log, which names the failure; `stderr` keeps the rest.
    const tail = stderr.slice(-MESSAGE_STDERR_LIMIT);
    super(tail.length > 0 ? `${message}\n--- nats-server stderr (tail) ---\n${tail}` : message, options);
  }
}

/** Options of {@link startNatsServer}. */
export interface NatsServerOptions {
  /** Config file passed with `-c`; command-line options below override it. */
  configFile?: string;
  /** Working directory of the server: a relative `store_dir` in the config file resolves against it. Default: `process.cwd()`. */
  cwd?: string;
  /**
   * JetStream store directory passed with `-sd`. nats-server 2.9 refuses `-sd` when the config
   * file sets `store_dir` itself ("Duplicate 'store_dir' configuration"); use {@link cwd} then.
   */
  storeDir?: string;
  /** Address to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Client port; `-1` picks a free one. Default `-1`. */
  port?: number;
  /** Monitoring port (`-m`): `0` disables it, `-1` picks a free one. Default: as the config says. */
  monitorPort?: number;
  /** `true` adds `-js`, `false` adds `-js=false`. Default: as the config says. */
  jetstream?: boolean;
  /** Binary to run. Default: {@link findNatsServer}, else `nats-server` on PATH. */
  binary?: string;
  /** Further arguments, appended last. */
  args?: string[];
  /** How long to wait until the server accepts connections. Default 10 s. */
  startTimeoutMs?: number;
  /** How long `stop` waits after SIGTERM before sending SIGKILL. Default 5 s. */
  stopGraceMs?: number;
}

/** A running `nats-server` child process. */
export interface NatsServerProcess extends AsyncDisposable {
  /** Client URL, e.g. `nats://127.0.0.1:41234`. */
  readonly url: string;
  /** Process id. */
  readonly pid: number;
  /** Client port. */
  readonly port: number;
  /** The last ~200 KB of the server's stderr (its log). */
  stderr(): string;
  /** Stops the server (SIGTERM, then SIGKILL after the grace period) and waits for it to exit. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Looks for an executable `nats-server` on PATH, then in `/usr/sbin` and `/usr/local/bin`.
 * @returns its absolute path, or `undefined` when there is none.
 */
export function findNatsServer(): string | undefined {
  const dirs = [...(process.env["PATH"] ?? "").split(delimiter).filter((d) => d.length > 0), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = join(dir, BINARY);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

/**
 * Starts `nats-server` and resolves once it accepts client connections.
 * @throws {NatsServerNotFoundError} when the binary does not exist.
 * @throws {NatsServerStartError} when the server exits early or is not reachable in time.
 * @example
 * await using server = await startNatsServer({ configFile: "nats.conf", cwd: repoRoot, port: -1 });
 * const nc = await connectNats({ servers: server.url, name: "dirigent" });
 */
export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServerProcess> {
  const host = opts.host ?? "127.0.0.1";
  const binary = opts.binary ?? findNatsServer() ?? BINARY;
  const portsDir = await mkdtemp(join(tmpdir(), "dirigent-nats-ports-"));
  const args = [
    ...(opts.configFile !== undefined ? ["-c", opts.configFile] : []),
    "-a",
    host,
    "-p",
    String(opts.port ?? -1),
    "--ports_file_dir",
    portsDir,
    ...(opts.monitorPort !== undefined ? ["-m", String(opts.monitorPort)] : []),
    ...(opts.jetstream === true ? ["-js"] : opts.jetstream === false ? ["-js=false"] : []),
    ...(opts.storeDir !== undefined ? ["-sd", opts.storeDir] : []),
    ...(opts.args ?? []),
  ];

  const child = spawn(binary, args, { cwd: opts.cwd, stdio: ["ignore", "ignore", "pipe"] });
  let stderrTail = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderrTail += chunk;
    if (stderrTail.length > STDERR_LIMIT) stderrTail = stderrTail.slice(-STDERR_LIMIT);
  });
  const exited = new Promise<string>((resolve) => {
    child.once("exit", (code, signal) => resolve(signal !== null ? `signal ${signal}` : `code ${String(code)}`));
  });
  const removePortsDir = () => rm(portsDir, { recursive: true, force: true });

  try {
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
  } catch (err) {
    await removePortsDir();
    if (isErrnoException(err) && err.code === "ENOENT") throw new NatsServerNotFoundError(binary, { cause: err });
    throw new NatsServerStartError(`cannot start '${binary}': ${String(err)}`, stderrTail, { cause: err });
  }
  const pid = child.pid;
  if (pid === undefined) throw new NatsServerStartError(`'${binary}' started without a pid`, stderrTail);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        killQuietly(pid, "SIGTERM");
        const grace = delay(opts.stopGraceMs ?? 5000, "timeout" as const, { ref: false });
        if ((await Promise.race([exited, grace])) === "timeout") {
          killQuietly(pid, "SIGKILL");
          await exited;
        }
      }
      child.stderr.destroy();
      await removePortsDir();
    })();
    return stopping;
  };

  const deadline = Date.now() + (opts.startTimeoutMs ?? 10_000);
  try {
    const url = await waitForPortsFile(join(portsDir, `${BINARY}_${pid}.ports`), exited, deadline);
    const port = Number(new URL(url).port);
    await waitForTcp(host, port, exited, deadline);
    return { url, pid, port, stderr: () => stderrTail, stop, [Symbol.asyncDispose]: stop };
  } catch (err) {
    await stop();
    const hint = stderrTail.includes("Duplicate 'store_dir'")
      ? " (the config file sets store_dir, so do not pass storeDir/-sd; set cwd instead)"
      : "";
    const message = messageOf(err);
    throw new NatsServerStartError(`nats-server (pid ${pid}) did not start: ${message}${hint}`, stderrTail, { cause: err });
  }
}

/** Polls for the ports file nats-server writes once it listens, and returns the client URL in it. */
async function waitForPortsFile(file: string, exited: Promise<string>, deadline: number): Promise<string> {
  let exit: string | undefined;
  void exited.then((how) => (exit = how));
  for (;;) {
    if (exit !== undefined) throw new Error(`exited early with ${exit}`);
    const url = await readPortsFile(file);
    if (url !== undefined) return url;
    if (Date.now() > deadline) throw new Error(`no ports file '${file}' before the deadline`);
    await Promise.race([delay(POLL_MS), exited]);
  }
}

async function readPortsFile(file: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    return undefined;
  }
  // The server may still be writing the file; a partial read is retried on the next poll.
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && "nats" in parsed && Array.isArray(parsed.nats)) {
      const first: unknown = parsed.nats[0];
      if (typeof first === "string") return first;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

async function waitForTcp(host: string, port: number, exited: Promise<string>, deadline: number): Promise<void> {
  let exit: string | undefined;
  void exited.then((how) => (exit = how));
  for (;;) {
    if (exit !== undefined) throw new Error(`exited early with ${exit}`);
    if (await canConnect(host, port)) return;
    if (Date.now() > deadline) throw new Error(`port ${host}:${port} not reachable before the deadline`);
    await Promise.race([delay(POLL_MS), exited]);
  }
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    // ESRCH: it exited between the check and the kill.
    if (!(isErrnoException(err) && err.code === "ESRCH")) throw err;
  }
}

function isErrnoException(err: unknown): err is NodeJS.ErrnoException {
  return err instanceof Error && "code" in err;
}
