/**
 * Test harness: a real `nats-server` per test file, started from the repository's `nats.conf`
 * with loopback-only, random-port and temporary-storage overrides (STYLE.md 4.8).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNatsServer, type NatsServerProcess } from "../../runtime/nats/server-process.js";

/** The repository's development config, shared with tests. */
export const NATS_CONF = fileURLToPath(new URL("../../nats.conf", import.meta.url));

/** Options of {@link startTestNatsServer}. */
export interface TestNatsServerOptions {
  /** Enable JetStream. Default `true`. */
  jetstream?: boolean;
  /**
   * A whole config file's text to use instead of the repository's `nats.conf` (written into the temporary directory;
   * a relative `store_dir` lands there). The loopback, random-port and storage overrides still apply.
   */
  config?: string;
  /** Arguments appended to the command line, e.g. `["-DV"]` for a protocol trace in {@link TestNatsServer.stderr}. */
  args?: string[];
}

/** A test server; its JetStream data lives in a temporary directory removed by `stop`. */
export interface TestNatsServer extends AsyncDisposable {
  /** Client URL of the current process. */
  readonly url: string;
  /** Client port; stays the same across {@link restart}. */
  readonly port: number;
  /** Pid of the current process. */
  readonly pid: number;
  /** The temporary directory: the server's working directory, holding `.dirigent/jetstream`. */
  readonly dir: string;
  /** The tail of the current process's stderr. */
  stderr(): string;
  /**
   * Stops the process (by pid) and starts a new one on the same port and store; clients reconnect. `meanwhile` runs
   * while no server runs (to change its files).
   */
  restart(meanwhile?: () => Promise<void>): Promise<void>;
  /** Stops the process (by pid) and removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a loopback `nats-server` on a random port with the repository's `nats.conf`.
 * @example
 * let server: TestNatsServer;
 * beforeAll(async () => { server = await startTestNatsServer(); });
 * afterAll(() => server.stop());
 */
export async function startTestNatsServer({ jetstream = true, config, args }: TestNatsServerOptions = {}): Promise<TestNatsServer> {
  const dir = await mkdtemp(join(tmpdir(), "dirigent-test-nats-"));
  const configFile = config === undefined ? NATS_CONF : join(dir, "nats.conf");
  if (config !== undefined) await writeFile(configFile, config, { mode: 0o600 });
  const launch = (port: number) =>
    // The config's relative store_dir lands in `dir`: 2.9 rejects `-sd` next to a store_dir in the file.
    startNatsServer({ configFile, cwd: dir, host: "127.0.0.1", port, monitorPort: 0, jetstream, ...(args ? { args } : {}) });
  let current: NatsServerProcess;
  try {
    current = await launch(-1);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const port = current.port;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= current.stop().finally(() => rm(dir, { recursive: true, force: true }));
    return stopped;
  };
  return {
    get url() {
      return current.url;
    },
    port,
    get pid() {
      return current.pid;
    },
    dir,
    stderr: () => current.stderr(),
    async restart(meanwhile?: () => Promise<void>) {
      await current.stop();
      await meanwhile?.();
      current = await launch(port);
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** A fresh subject root such as `t3f9a0c21d4e8`, valid as a `[a-z0-9_-]` token; isolates tests on one server. */
export function randomRoot(): string {
  return `t${randomBytes(6).toString("hex")}`;
}
