/**
 * Durability figures of `npm run bench` (issue 5), with role processes started from `dist` (`npm run build` first):
 * - the time from a `kill -9` of the Director running a task to another Director process resuming it
 *   (`task.resumed`), with `DIRIGENT_ACK_WAIT_MS=3000` (target ≤ 5 s);
 * - task throughput with 1, 2 and 4 Handler processes (1 Director and 1 Evaluator process, a mock model answering
 *   after 100 ms, 4 sessions per Handler), so the Handlers are what is scaled.
 * Sizes: `BENCH_RESUME_REPEATS` (default 5), `BENCH_SCALE_OUT_TASKS` (default 200).
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, bench, describe } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { figureOf, machineLine, once, record, WHOLE } from "./results.js";

const ACK_WAIT_MS = 3000;
const RESUME_REPEATS = Number(process.env.BENCH_RESUME_REPEATS ?? 5);
const SCALE_OUT_TASKS = Number(process.env.BENCH_SCALE_OUT_TASKS ?? 200);
const MODEL_DELAY_MS = 100;
const HANDLER_CONCURRENCY = 4;

let server: TestNatsServer;
let mock: MockLlmServer;
let nc: NatsConnection;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "ok", delayMs: MODEL_DELAY_MS }] } });
  nc = await connect({ servers: server.url, name: "bench-durability" });
  console.log(`[bench] durability on ${machineLine()}`);
});

afterAll(async () => {
  await nc?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

const env = () => ({
  OPENAI_BASE_URL: mock.url,
  OPENAI_API_KEY: "bench",
  DIRIGENT_MODEL_MAX_RETRIES: "0",
  DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
  DIRIGENT_LOG_LEVEL: "info",
});

async function worker(root: string, role: string, concurrency: number): Promise<CliProcess> {
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", String(concurrency)], env());
  processes.push(p);
  await p.waitFor(/ready/, 30_000);
  return p;
}

async function stopAll(list: CliProcess[]): Promise<void> {
  await Promise.all(list.map((p) => p.stop()));
}

/** Events of every task under `root`, by type, with the time they arrived. */
function follow(root: string) {
  const seen = new Recorder<{ taskId: string; type: string; at: number }>();
  const sub = nc.subscribe(`${root}.tasks.*.events`, {
    callback: (_err, m) => {
      const e = m.json<{ taskId: string; type: string }>();
      seen.push({ taskId: e.taskId, type: e.type, at: Date.now() });
    },
  });
  return { seen, stop: () => sub.unsubscribe() };
}

async function submit(root: string, taskId: string, description: string): Promise<void> {
  const body = JSON.stringify({ taskId, xml: `<task><description>${description}</description></task>` });
  await nc.request(`${root}.tasks.submit`, body, { timeout: 10_000 });
}

describe("durability", () => {
  bench(
    "9 kill -9 of a Director → its task resumes",
    once(async () => {
      const root = randomRoot();
      const started = await Promise.all(["memory", "handler", "evaluator"].map((r) => worker(root, r, 8)));
      const directors = await Promise.all([worker(root, "director", 4), worker(root, "director", 4)]);
      const { seen, stop } = follow(root);
      await nc.flush();
      const times: number[] = [];
      try {
        for (let i = 0; i < RESUME_REPEATS; i++) {
          // A model call long enough that the kill lands inside it.
          mock.setScript({ rules: [{ reply: "ok", delayMs: 2000 }] });
          const taskId = `resume-${i}-${Date.now()}`;
          await submit(root, taskId, `resume me ${taskId}`);
          const claimed = new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`);
          const owner = await Promise.race(directors.map((d) => d.waitFor(claimed, 20_000).then(() => d)));
          await seen.until((v) => v.some((e) => e.taskId === taskId && e.type === "node.started"), "the evaluation to start", 20_000);
          owner.child.kill("SIGKILL");
          const killedAt = Date.now();
          await owner.exited;
          const resumed = await seen.until((v) => v.some((e) => e.taskId === taskId && e.type === "task.resumed"), "the resume", 30_000);
          times.push((resumed.find((e) => e.taskId === taskId && e.type === "task.resumed")?.at ?? Number.NaN) - killedAt);
          await seen.until((v) => v.some((e) => e.taskId === taskId && e.type === "task.completed"), "the completion", 30_000);
          directors.splice(directors.indexOf(owner), 1, await worker(root, "director", 4));
        }
      } finally {
        stop();
        mock.setScript({ rules: [{ reply: "ok", delayMs: MODEL_DELAY_MS }] });
        await stopAll([...started, ...directors]);
      }
      const figure = figureOf(times);
      record({
        order: 9.1,
        workload: "9 durability: kill -9 of a Director → task.resumed on another",
        variant: `Director processes, ack wait ${ACK_WAIT_MS} ms`,
        unit: "ms",
        figure,
        target: "≤ 5000 ms",
        met: figure.max <= 5000,
        note: `${times.length} kills`,
      });
    }),
    WHOLE,
  );

  bench(
    "9 throughput with 1, 2 and 4 Handler processes",
    once(async () => {
      const rates: Record<number, number> = {};
      for (const handlers of [1, 2, 4]) {
        const root = randomRoot();
        const others = await Promise.all([worker(root, "memory", 8), worker(root, "evaluator", 64)]);
        const workers = await Promise.all(Array.from({ length: handlers }, () => worker(root, "handler", HANDLER_CONCURRENCY)));
        const director = await worker(root, "director", 64);
        const { seen, stop } = follow(root);
        await nc.flush();
        try {
          const done = () => seen.values.filter((e) => e.type === "task.completed").length;
          // Warm-up: one task per Handler slot.
          const warm = handlers * HANDLER_CONCURRENCY;
          await Promise.all(Array.from({ length: warm }, (_, i) => submit(root, `warm-${i}`, `warm ${i}`)));
          await seen.until(() => done() >= warm, "the warm-up", 60_000);
          const t0 = performance.now();
          await Promise.all(Array.from({ length: SCALE_OUT_TASKS }, (_, i) => submit(root, `task-${i}`, `scale ${handlers} ${i}`)));
          await seen.until(() => done() >= warm + SCALE_OUT_TASKS, `${SCALE_OUT_TASKS} tasks`, 300_000);
          rates[handlers] = SCALE_OUT_TASKS / ((performance.now() - t0) / 1000);
        } finally {
          stop();
          await stopAll([director, ...workers, ...others]);
        }
        record({
          order: 9.2 + handlers / 100,
          workload: `9 durability: task throughput by Handler processes (${SCALE_OUT_TASKS} tasks, model 100 ms, ${HANDLER_CONCURRENCY} sessions each)`,
          variant: `${handlers} Handler process${handlers > 1 ? "es" : ""}`,
          unit: "tasks/s",
          figure: figureOf([rates[handlers] ?? Number.NaN]),
          ...(handlers > 1 && rates[1] ? { note: `${((rates[handlers] ?? 0) / rates[1]).toFixed(2)}× one Handler` } : {}),
        });
      }
    }),
    WHOLE,
  );
});
