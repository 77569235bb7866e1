/**
 * The BullMQ side of the user-level bench: a worker process (bullmq-worker.mjs) on the bench's private Redis, whose
 * jobs make the model call with `fetch`; the bench process adds the jobs (`queue.add`) and learns of their end as a
 * user in another process would, through `QueueEvents` (`completed`, and `job.waitUntilFinished` one at a time).
 */
import { randomBytes } from "node:crypto";
import { Queue, QueueEvents } from "bullmq";
import type { TestRedis } from "../bullmq.js";
import type { Contender } from "./dirigent.js";
import { here, startNode } from "./processes.js";

const PROMPT = "Answer with the word ok.";

/** Starts the worker process (concurrency `concurrency`) and the submitting side. */
export async function startBull(redis: TestRedis, modelUrl: string, concurrency: number): Promise<Contender> {
  const name = `user-${randomBytes(4).toString("hex")}`;
  const { child } = await startNode(
    here("bullmq-worker.mjs"),
    [],
    { BENCH_REDIS_PORT: String(redis.port), BENCH_QUEUE: name, BENCH_CONCURRENCY: String(concurrency), BENCH_MODEL_URL: modelUrl },
    /^ready$/m,
  );
  const clients = [redis.connection(), redis.connection()] as const;
  const queue = new Queue(name, { connection: clients[0] });
  const events = new QueueEvents(name, { connection: clients[1] });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
  let completed = 0;
  let onCompleted: () => void = () => undefined;
  events.on("completed", () => {
    completed++;
    onCompleted();
  });
  events.on("failed", ({ jobId, failedReason }) => console.error(`[bench] BullMQ job ${jobId} failed: ${failedReason}`));
  return {
    pid: child.pid,
    async throughput(count) {
      // Runs follow one another: every completion counted here is of this run's jobs.
      completed = 0;
      const all = new Promise<void>((resolve) => (onCompleted = () => completed >= count && resolve()));
      const start = performance.now();
      await Promise.all(Array.from({ length: count }, () => queue.add("chat", { prompt: PROMPT })));
      await all;
      onCompleted = () => undefined;
      return count / ((performance.now() - start) / 1000);
    },
    async latency() {
      const start = performance.now();
      const job = await queue.add("chat", { prompt: PROMPT });
      await job.waitUntilFinished(events, 30_000);
      return performance.now() - start;
    },
    async stop() {
      await child.stop();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
      for (const client of clients) client.disconnect();
    },
  };
}
