/**
 * The BullMQ side of the user-level bench, as its own process: one Worker of `BENCH_CONCURRENCY` on queue
 * `BENCH_QUEUE` of the Redis at 127.0.0.1:`BENCH_REDIS_PORT`, whose job makes one chat-completions call with `fetch`
 * (Node's, keep-alive) to `BENCH_MODEL_URL` and returns the answer's text. Prints `ready` once the worker is connected.
 */
import { Worker } from "bullmq";
import { Redis } from "ioredis";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const modelUrl = `${env("BENCH_MODEL_URL")}/chat/completions`;
const connection = new Redis({ host: "127.0.0.1", port: Number(env("BENCH_REDIS_PORT")), maxRetriesPerRequest: null });

const worker = new Worker(
  env("BENCH_QUEUE"),
  async (job) => {
    const response = await fetch(modelUrl, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer bench" },
      body: JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: job.data.prompt }] }),
    });
    if (!response.ok) throw new Error(`model answered ${response.status}`);
    const completion = await response.json();
    return completion.choices[0].message.content;
  },
  { connection, concurrency: Number(env("BENCH_CONCURRENCY")) },
);
worker.on("failed", (job, error) => process.stderr.write(`job ${job?.id} failed: ${error.message}\n`));
await worker.waitUntilReady();
process.stdout.write("ready\n");

const stop = async () => {
  await worker.close();
  connection.disconnect();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());
