/**
 * The DBOS side of the user-level bench: a database of its own on the machine's PostgreSQL (created here, dropped at
 * the end) as DBOS's system database, the worker process (dbos-worker.mjs) running the workflows from its queue, and
 * the bench process enqueueing them with a `DBOSClient` as a user in another process would (`client.enqueue`), and
 * awaiting their end by polling PostgreSQL every {@link POLL_MS} ms: `client.waitAll` for a batch (one query for all
 * of them a poll), `handle.getResult` one at a time.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { DBOSClient } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import type { Sequential } from "../dirigent.js";
import { PG_URL, withDatabase } from "../langgraph.js";
import { startNode, type Child } from "../processes.js";

const PROMPT = "Answer with the word ok.";
/** The queue's and the waits' polling interval, ms (DBOS's default is 1,000 ms for both). */
export const POLL_MS = 10;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Creates the database, starts the worker (`concurrency` workflows at once) and the submitting side. */
export async function startDbos(modelUrl: string, concurrency: number, steps: number): Promise<Sequential> {
  const database = `dirigent_bench_dbos_${randomBytes(4).toString("hex")}`;
  const url = withDatabase(PG_URL, database);
  const queueName = "bench";
  await admin(`create database ${database}`);
  let child: Child | undefined;
  let client: DBOSClient | undefined;
  const stopAll = async () => {
    await client?.destroy();
    await child?.stop();
    await admin(`drop database if exists ${database} with (force)`);
  };
  try {
    ({ child } = await startNode(
      fileURLToPath(new URL("dbos-worker.mjs", import.meta.url)),
      [],
      {
        BENCH_PG_URL: url,
        BENCH_MODEL_URL: modelUrl,
        BENCH_STEPS: String(steps),
        BENCH_QUEUE: queueName,
        BENCH_CONCURRENCY: String(concurrency),
        BENCH_POLL_MS: String(POLL_MS),
      },
      /^ready$/m,
    ));
    const dbos = await DBOSClient.create({ systemDatabaseUrl: url });
    client = dbos;
    const enqueue = (workflowName: string) => dbos.enqueue({ queueName, workflowName }, PROMPT);
    const timed = async (workflowName: string) => {
      const start = performance.now();
      const handle = await enqueue(workflowName);
      await handle.getResult({ pollingIntervalMs: POLL_MS });
      return performance.now() - start;
    };
    const worker = child;
    return {
      pid: worker.pid,
      async throughput(count) {
        const start = performance.now();
        const handles = await Promise.all(Array.from({ length: count }, () => enqueue("chat")));
        await dbos.waitAll(handles, { pollingIntervalMs: POLL_MS });
        const rate = count / ((performance.now() - start) / 1000);
        await Promise.all(handles.map((h) => h.getResult())); // throws when one failed
        return rate;
      },
      latency: () => timed("chat"),
      sequentialLatency: () => timed("steps"),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
