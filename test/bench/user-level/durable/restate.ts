/**
 * The Restate side of the user-level bench: the Restate server (`@restatedev/restate-server`'s binary, 1.7) as a
 * child process on free loopback ports with a temporary data directory, the service process (restate-service.mjs)
 * registered with it as a deployment, and the bench process invoking the service through the server's HTTP ingress
 * as a user in another process would: `POST /bench/chat` (or `/bench/steps`), answered with the handler's result
 * once the invocation has ended, on keep-alive connections, at most `concurrency` at once.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { Agent, request } from "node:http";
import { createRequire } from "node:module";
import { arch, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Sequential } from "../dirigent.js";
import { startNode, startProcess, type Child } from "../processes.js";

const PROMPT = "Answer with the word ok.";

/** `count` free loopback ports (each held until all are known, then released for the server to take). */
async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  const ports = await Promise.all(
    servers.map((s) => new Promise<number>((resolve) => s.listen(0, "127.0.0.1", () => resolve((s.address() as { port: number }).port)))),
  );
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** One HTTP/1.1 request with a JSON body; resolves with the body of a 2xx answer. */
function post(agent: Agent | undefined, port: number, path: string, body: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () =>
          (res.statusCode ?? 500) < 300 ? resolve(text) : reject(new Error(`Restate ${path}: ${res.statusCode} ${text}`)),
        );
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** `attempt` until it resolves (Restate's admin and partitions come up after its listeners), at most `ms`. */
async function retry<T>(ms: number, attempt: () => Promise<T>): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** The server binary that `@restatedev/restate-server` would start. */
const serverBinary = () => createRequire(import.meta.url).resolve(`@restatedev/restate-server-${platform()}-${arch()}/bin/restate-server`);

/** Restate, with the pid of its server beside the service's. */
export interface Restate extends Sequential {
  readonly serverPid: number;
}

/** Starts the server and the service (making `steps` calls in `/bench/steps`), and the submitting side. */
export async function startRestate(modelUrl: string, concurrency: number, steps: number): Promise<Restate> {
  const dataDir = await mkdtemp(join(tmpdir(), "dirigent-bench-restate-"));
  const children: Child[] = [];
  const stopAll = async () => {
    for (const child of children.reverse()) await child.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const [ingress, admin, fabric] = await freePorts(3);
    const { child: server } = await startProcess(
      serverBinary(),
      ["--no-logo", "--base-dir", dataDir, "--listen-mode", "tcp"],
      {
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
        RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`,
        RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabric}/`,
        RESTATE_LOG_DISABLE_ANSI_CODES: "true",
      },
      /Ingress HTTP listening/,
    );
    children.push(server);
    const { child: service, match } = await startNode(
      fileURLToPath(new URL("restate-service.mjs", import.meta.url)),
      [],
      { BENCH_MODEL_URL: modelUrl, BENCH_STEPS: String(steps) },
      /listening (\d+)/,
    );
    children.push(service);
    await retry(30_000, () => post(undefined, admin!, "/deployments", { uri: `http://127.0.0.1:${match[1]}` }));
    await retry(30_000, () => post(undefined, ingress!, "/bench/chat", PROMPT));
    const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
    const run = (path: string) => post(agent, ingress!, path, PROMPT);
    const timed = async (path: string) => {
      const start = performance.now();
      await run(path);
      return performance.now() - start;
    };
    return {
      pid: service.pid,
      serverPid: server.pid,
      async throughput(count) {
        const start = performance.now();
        await Promise.all(Array.from({ length: count }, () => run("/bench/chat")));
        return count / ((performance.now() - start) / 1000);
      },
      latency: () => timed("/bench/chat"),
      sequentialLatency: () => timed("/bench/steps"),
      async stop() {
        agent.destroy();
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
