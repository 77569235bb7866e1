/**
 * The LangGraph.js side of the user-level bench: a database of its own on the machine's PostgreSQL (created here,
 * dropped at the end), the worker process (langgraph-worker.mjs) checkpointing into it, and the bench process
 * submitting runs over HTTP (`POST /run`, or `POST /steps` for the chain of workload 13; keep-alive, at most the
 * worker's concurrency of connections).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Agent, request } from "node:http";
import pg from "pg";
import type { Sequential } from "./dirigent.js";
import { here, startNode } from "./processes.js";

/** The database the bench connects to first (to create and drop its own): `BENCH_PG_URL`. */
export const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Whether PostgreSQL answers at {@link PG_URL}; the reason when it does not. */
export async function postgresMissing(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("select 1");
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** `url` with its database replaced by `database`. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const PROMPT = "Answer with the word ok.";

/** Creates the database, starts the worker (concurrency `concurrency`, a chain of `steps` nodes) and the submitting side. */
export async function startLangGraph(modelUrl: string, concurrency: number, steps: number): Promise<Sequential> {
  const database = `dirigent_bench_${randomBytes(4).toString("hex")}`;
  await admin(`create database ${database}`);
  const drop = () => admin(`drop database if exists ${database} with (force)`);
  let port: number;
  let stopChild: () => Promise<void>;
  let pid: number;
  try {
    const { child, match } = await startNode(
      here("langgraph-worker.mjs"),
      [],
      {
        BENCH_PG_URL: withDatabase(PG_URL, database),
        BENCH_CONCURRENCY: String(concurrency),
        BENCH_MODEL_URL: modelUrl,
        BENCH_STEPS: String(steps),
      },
      /listening (\d+)/,
    );
    port = Number(match[1]);
    pid = child.pid;
    stopChild = () => child.stop();
  } catch (error) {
    await drop();
    throw error;
  }
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const run = (path = "/run") =>
    new Promise<void>((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json" } },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`LangGraph run: ${res.statusCode} ${body}`))));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ threadId: randomUUID(), prompt: PROMPT }));
    });
  return {
    pid,
    async throughput(count) {
      const start = performance.now();
      await Promise.all(Array.from({ length: count }, () => run()));
      return count / ((performance.now() - start) / 1000);
    },
    async latency() {
      const start = performance.now();
      await run();
      return performance.now() - start;
    },
    async sequentialLatency() {
      const start = performance.now();
      await run("/steps");
      return performance.now() - start;
    },
    async stop() {
      agent.destroy();
      await stopChild();
      await drop();
    },
  };
}
