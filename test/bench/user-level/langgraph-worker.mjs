/**
 * The LangGraph.js side of the user-level bench, as its own process: a one-node graph whose node makes one
 * chat-completions call through the `openai` SDK (one client for the process, keep-alive) to `BENCH_MODEL_URL`, and a
 * chain of `BENCH_STEPS` such nodes one after the other (workload 13), each compiled with `PostgresSaver` (`@langchain/langgraph-checkpoint-postgres`) on the database `BENCH_PG_URL`, so every
 * run is checkpointed under its own `thread_id` (durability "async", LangGraph's default). LangGraph.js has no queue
 * of its own: runs are submitted over HTTP, `POST /run` (or `POST /steps`, the chain) with `{"threadId", "prompt"}` on a keep-alive connection,
 * answered with `{"answer"}` when the run has ended; at most `BENCH_CONCURRENCY` runs at once (the others wait here,
 * in memory). The pg pool has `BENCH_PG_POOL` connections (pg's default of 10 when unset, as `fromConnString` gives).
 * Prints `listening <port>` once the checkpointer's tables exist and the server accepts connections.
 */
import { createServer } from "node:http";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import OpenAI from "openai";
import pg from "pg";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const concurrency = Number(env("BENCH_CONCURRENCY"));
const pool = new pg.Pool({
  connectionString: env("BENCH_PG_URL"),
  ...(process.env.BENCH_PG_POOL ? { max: Number(process.env.BENCH_PG_POOL) } : {}),
});
const checkpointer = new PostgresSaver(pool);
await checkpointer.setup();
const openai = new OpenAI({ baseURL: env("BENCH_MODEL_URL"), apiKey: "bench", maxRetries: 0 });

const State = Annotation.Root({ prompt: Annotation(), answer: Annotation() });
/** A node making one model call with `prompt` (the state's, behind `prefix`). */
const modelNode =
  (prefix = "") =>
  async (state) => {
    const content = `${prefix}${state.prompt}`;
    const completion = await openai.chat.completions.create({ model: "bench-model", messages: [{ role: "user", content }] });
    return { answer: completion.choices[0]?.message.content ?? "" };
  };
const graph = new StateGraph(State).addNode("model", modelNode()).addEdge(START, "model").addEdge("model", END).compile({ checkpointer });
const steps = Number(env("BENCH_STEPS"));
const chainBuilder = new StateGraph(State);
for (let i = 1; i <= steps; i++) chainBuilder.addNode(`step-${i}`, modelNode(`Step ${i}: `));
chainBuilder.addEdge(START, "step-1");
for (let i = 1; i < steps; i++) chainBuilder.addEdge(`step-${i}`, `step-${i + 1}`);
chainBuilder.addEdge(`step-${steps}`, END);
const chain = chainBuilder.compile({ checkpointer });
const graphs = { "/run": graph, "/steps": chain };

/** Runs in flight, and the submissions waiting for a slot. */
let running = 0;
const waiting = [];
const slot = () => (running < concurrency ? (running++, Promise.resolve()) : new Promise((resolve) => waiting.push(resolve)));
const release = () => {
  const next = waiting.shift();
  if (next) next();
  else running--;
};

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk) => (body += chunk));
  req.on("end", async () => {
    const target = req.method === "POST" ? graphs[req.url ?? ""] : undefined;
    if (!target) {
      res.writeHead(404).end();
      return;
    }
    await slot();
    try {
      const { threadId, prompt } = JSON.parse(body);
      const state = await target.invoke({ prompt }, { configurable: { thread_id: threadId } });
      const out = JSON.stringify({ answer: state.answer });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) }).end(out);
    } catch (error) {
      process.stderr.write(`run failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      res.writeHead(500).end(JSON.stringify({ error: String(error) }));
    } finally {
      release();
    }
  });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === "object" && address ? address.port : 0}\n`);
});

const stop = async () => {
  server.close();
  server.closeAllConnections();
  await pool.end();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());
