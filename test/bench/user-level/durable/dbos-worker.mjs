/**
 * The DBOS side of the user-level bench, as its own process: `@dbos-inc/dbos-sdk` on the system database
 * `BENCH_PG_URL` (created by the bench), two workflows and one queue. `chat` is one step, one chat-completions call
 * through the `openai` SDK (one client for the process, keep-alive) to `BENCH_MODEL_URL`; `steps` is
 * `BENCH_STEPS` such steps one after the other. The queue `BENCH_QUEUE` runs at most `BENCH_CONCURRENCY` workflows
 * of this process at once and polls PostgreSQL every `BENCH_POLL_MS` ms (DBOS's default: 1,000 ms). The bench
 * enqueues with a `DBOSClient` from its own process. Prints `ready` once DBOS is launched and the queue registered.
 */
import { DBOS } from "@dbos-inc/dbos-sdk";
import OpenAI from "openai";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const steps = Number(env("BENCH_STEPS"));
const openai = new OpenAI({ baseURL: env("BENCH_MODEL_URL"), apiKey: "bench", maxRetries: 0 });

const call = async (prompt) => {
  const completion = await openai.chat.completions.create({ model: "bench-model", messages: [{ role: "user", content: prompt }] });
  return completion.choices[0]?.message.content ?? "";
};

DBOS.registerWorkflow(async (prompt) => DBOS.runStep(() => call(prompt), { name: "model" }), { name: "chat" });
DBOS.registerWorkflow(
  async (prompt) => {
    let answer = "";
    for (let i = 0; i < steps; i++) answer = await DBOS.runStep(() => call(`Step ${i + 1}: ${prompt}`), { name: `model-${i + 1}` });
    return answer;
  },
  { name: "steps" },
);

DBOS.setConfig({ name: "dirigent-bench", systemDatabaseUrl: env("BENCH_PG_URL"), logLevel: "warn" });
await DBOS.launch();
await DBOS.registerQueue(env("BENCH_QUEUE"), {
  workerConcurrency: Number(env("BENCH_CONCURRENCY")),
  minPollingIntervalMs: Number(env("BENCH_POLL_MS")),
});
process.stdout.write("ready\n");

const stop = async () => {
  await DBOS.shutdown();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());
