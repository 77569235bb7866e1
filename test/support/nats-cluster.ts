/**
 * Test harness: a JetStream cluster of real `nats-server` processes on loopback, each with its own random client and
 * route ports, its own store directory and `server_name`, configured by `renderClusterNode` (what `dirigent nats-conf
 * --cluster` writes). A node can be killed with SIGKILL and started again on the same ports and store.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { renderClusterNode, type ClusterNode } from "../../runtime/nats/conf/cluster-conf.js";
import { startNatsServer, type NatsServerProcess } from "../../runtime/nats/server-process.js";

/** A cluster of test servers; `stop` ends every process and removes the temporary directory. */
export interface TestNatsCluster extends AsyncDisposable {
  /** The nodes' `server_name`s, in order. */
  readonly names: readonly string[];
  /** Every node's client URL, in order. */
  readonly urls: readonly string[];
  /** The client URLs comma-separated, as `--nats` / `NATS_URL` take them. */
  readonly url: string;
  /** Whether node `name` runs. */
  running(name: string): boolean;
  /** `kill -9`s node `name` and waits for it to exit. */
  kill(name: string): Promise<void>;
  /** Starts node `name` again on its ports and store. */
  start(name: string): Promise<void>;
  /** The tail of node `name`'s log. */
  stderr(name: string): string;
  /** Stops every node and removes the directory. Idempotent. */
  stop(): Promise<void>;
}

/** A free loopback port (released before use: another process could take it in between, which is unlikely). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** Starts `n` (default 3) clustered nodes and waits until JetStream answers through the first. */
export async function startTestNatsCluster(n = 3): Promise<TestNatsCluster> {
  const dir = await mkdtemp(join(tmpdir(), "dirigent-test-cluster-"));
  const ports: number[] = [];
  while (ports.length < 2 * n) {
    const port = await freePort();
    if (!ports.includes(port)) ports.push(port);
  }
  const nodes: ClusterNode[] = Array.from({ length: n }, (_, i) => ({
    name: `n${i + 1}`,
    host: "127.0.0.1",
    listen: "127.0.0.1",
    clientPort: ports[2 * i] ?? 0,
    routePort: ports[2 * i + 1] ?? 0,
    monitorPort: 0,
    storeDir: join(dir, `n${i + 1}`, "jetstream"),
  }));
  const files = await Promise.all(
    nodes.map(async (node, i) => {
      const file = join(dir, `${node.name}.conf`);
      await writeFile(file, renderClusterNode({ clusterName: "test", nodes }, i));
      return file;
    }),
  );
  const processes = new Map<string, NatsServerProcess>();
  const logs = new Map<string, string>();
  const start = async (name: string) => {
    const i = nodes.findIndex((node) => node.name === name);
    const node = nodes[i];
    const configFile = files[i];
    if (!node || !configFile) throw new Error(`no node ${name}`);
    processes.set(name, await startNatsServer({ configFile, cwd: dir, port: node.clientPort, monitorPort: 0 }));
  };
  const stopNode = async (name: string) => {
    const p = processes.get(name);
    processes.delete(name);
    if (p) logs.set(name, p.stderr());
    await p?.stop();
  };
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= Promise.all(nodes.map((node) => stopNode(node.name))).then(() => rm(dir, { recursive: true, force: true }));
    return stopped;
  };
  const urls = nodes.map((node) => `nats://127.0.0.1:${node.clientPort}`);
  try {
    await Promise.all(nodes.map((node) => start(node.name)));
    await untilJetStream(urls.join(","));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    names: nodes.map((node) => node.name),
    urls,
    url: urls.join(","),
    running: (name) => processes.has(name),
    async kill(name) {
      const p = processes.get(name);
      if (!p) throw new Error(`node ${name} is not running`);
      process.kill(p.pid, "SIGKILL");
      await stopNode(name);
    },
    start,
    stderr: (name) => processes.get(name)?.stderr() ?? logs.get(name) ?? "",
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** Waits until the cluster has elected its JetStream meta leader (account info answers), within 60 s. */
async function untilJetStream(servers: string): Promise<void> {
  const nc = await connect({ servers: servers.split(",") });
  try {
    const jsm = await jetstreamManager(nc, { checkAPI: false });
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        // No event announces the meta leader to a client: poll.
        await delay(100);
      }
    }
  } finally {
    await nc.close();
  }
}
