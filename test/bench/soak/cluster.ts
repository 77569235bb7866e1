/**
 * The processes of `npm run soak`: `dirigent up` processes (every role; never killed, their memory sampled) and one
 * `dirigent worker` process per role beside them, of which the soak `kill -9`s one at random and starts a
 * replacement. The workers share the work with the `up` processes (the Directors the intake, the others their
 * queue groups), so a killed worker leaves tasks in flight on both sides to be recovered.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCli, type CliProcess } from "../../support/processes.js";
import { KILLED_ROLES, type KilledRole } from "./report.js";

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  natsUrl: string;
  root: string;
  modelUrl: string;
  /** `dirigent up` processes. */
  ups: number;
  /** `--concurrency` of every process. */
  concurrency: number;
  /** `DIRIGENT_ACK_WAIT_MS`: how soon the intake redelivers a killed Director's tasks. */
  ackWaitMs: number;
}

/** A running `up` process with its metrics endpoint. */
export interface UpProcess {
  readonly process: CliProcess;
  readonly pid: number;
  /** `http://127.0.0.1:<port>/metrics`. */
  readonly metricsUrl: string;
}

/** The running processes. */
export interface Cluster {
  readonly ups: readonly UpProcess[];
  /** `kill -9` of the worker of `role`, then its replacement started; resolves once the replacement is ready. */
  kill(role: KilledRole): Promise<void>;
  /** Output of every process started (the killed ones' included), for a failed run. */
  outputs(): string;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 120_000;

/** Starts `options.ups` `dirigent up` processes and one worker per role. */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const dataDir = await mkdtemp(join(tmpdir(), "dirigent-soak-"));
  const env = {
    OPENAI_BASE_URL: options.modelUrl,
    OPENAI_API_KEY: "soak",
    DIRIGENT_ACK_WAIT_MS: String(options.ackWaitMs),
    DIRIGENT_LOG_LEVEL: process.env.SOAK_LOG_LEVEL ?? "warn",
    DIRIGENT_DATA_DIR: dataDir,
  };
  const common = ["--nats", options.natsUrl, "--prefix", options.root, "--concurrency", String(options.concurrency)];
  const all: { name: string; process: CliProcess }[] = [];
  const started = (name: string, args: string[]) => {
    const p = startCli(args, env);
    all.push({ name, process: p });
    return p;
  };
  const startWorker = async (role: KilledRole) => {
    const p = started(`worker ${role}`, ["worker", "--role", role, ...common]);
    await p.waitFor(/dirigent: ready/, READY_TIMEOUT_MS);
    return p;
  };
  const stopAll = async () => {
    await Promise.all(all.map((p) => p.process.stop()));
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const ups = await Promise.all(
      Array.from({ length: options.ups }, async (_, i) => {
        const p = started(`up ${i + 1}`, ["up", ...common, "--metrics-port", "0"]);
        const [, metricsUrl = ""] = await p.waitFor(/metrics on (\S+)/, READY_TIMEOUT_MS);
        await p.waitFor(/dirigent: ready/, READY_TIMEOUT_MS);
        return { process: p, pid: p.child.pid ?? 0, metricsUrl };
      }),
    );
    const workers = new Map<KilledRole, CliProcess>();
    for (const role of KILLED_ROLES) workers.set(role, await startWorker(role));
    return {
      ups,
      async kill(role) {
        const victim = workers.get(role);
        if (victim) {
          victim.child.kill("SIGKILL");
          await victim.exited;
        }
        workers.set(role, await startWorker(role));
      },
      outputs: () => all.map((p) => `=== ${p.name} (pid ${p.process.child.pid})\n${p.process.output().slice(-20_000)}`).join("\n"),
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The V8 heap in use of an `up` process, from its Prometheus metrics; undefined when it does not answer. */
export async function heapUsedOf(up: UpProcess): Promise<number | undefined> {
  try {
    const text = await (await fetch(up.metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
    const value = text.match(/^dirigent_nodejs_heap_size_used_bytes (\S+)$/m)?.[1];
    return value === undefined ? undefined : Number(value);
  } catch {
    return undefined;
  }
}
