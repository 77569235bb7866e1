/**
 * The BullMQ side of the comparison: a private `redis-server` (random loopback port, no persistence, temporary
 * directory; never the machine's own Redis) and BullMQ throughput and latency runs against it.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue, QueueEvents, Worker } from "bullmq";
import { Redis } from "ioredis";

/** A running private Redis. */
export interface TestRedis {
  readonly port: number;
  /** The server's process id (its CPU is read from /proc). */
  readonly pid: number;
  /** A new client per Queue, Worker or QueueEvents (BullMQ under ESM takes constructed clients). */
  connection(): Redis;
  stop(): Promise<void>;
}

/** Whether `redis-server` is on PATH. */
export function hasRedis(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Starts `redis-server` on a random loopback port with persistence off. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), "dirigent-bench-redis-"));
  const port = await freePort();
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start within 10 s: ${output}`)), 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}: ${output}`));
    });
  });
  child.stdout?.removeAllListeners("data");
  child.stderr?.removeAllListeners("data");
  child.removeAllListeners("exit");
  return {
    port,
    pid: child.pid ?? 0,
    connection: () => new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: null }),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Jobs per second of `count` jobs added at once and processed by one Worker of `concurrency`. */
export async function bullThroughput(connection: () => Redis, count: number, concurrency = 50): Promise<number> {
  const clients: Redis[] = [];
  const connect = () => {
    const client = connection();
    clients.push(client);
    return client;
  };
  const name = `bench-${randomBytes(4).toString("hex")}`;
  const queue = new Queue(name, { connection: connect() });
  let completed = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((resolve) => (resolveAll = resolve));
  const worker = new Worker(name, async () => "ok", { connection: connect(), concurrency, autorun: false });
  worker.on("completed", () => {
    if (++completed === count) resolveAll();
  });
  void worker.run();
  await worker.waitUntilReady();
  await queue.waitUntilReady();
  try {
    const start = performance.now();
    await Promise.all(Array.from({ length: count }, (_, i) => queue.add("job", { i })));
    await all;
    return count / ((performance.now() - start) / 1000);
  } finally {
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
    for (const client of clients) client.disconnect();
  }
}

/** Per-job latency in ms, add → completed as the adding client learns it (QueueEvents), one job at a time. */
export async function bullLatencies(connection: () => Redis, count: number, concurrency = 50): Promise<number[]> {
  const clients: Redis[] = [];
  const connect = () => {
    const client = connection();
    clients.push(client);
    return client;
  };
  const name = `bench-${randomBytes(4).toString("hex")}`;
  const queue = new Queue(name, { connection: connect() });
  const events = new QueueEvents(name, { connection: connect() });
  const worker = new Worker(name, async () => "ok", { connection: connect(), concurrency });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady(), worker.waitUntilReady()]);
  const out: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const start = performance.now();
      const job = await queue.add("job", { i });
      await job.waitUntilFinished(events, 10_000);
      out.push(performance.now() - start);
    }
    return out;
  } finally {
    await worker.close();
    await events.close();
    await queue.obliterate({ force: true });
    await queue.close();
    for (const client of clients) client.disconnect();
  }
}
