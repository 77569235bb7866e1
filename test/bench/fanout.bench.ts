/**
 * Fan-out figures of `npm run bench` (issue 19): one task, a `<task type="map" over="items">` whose single step is
 * one model turn, so each branch is one Handler session.
 * - 10.1: a map of 100 branches whose model answers after 1 s, with Handler concurrency enough for all (target
 *   < 1.5 s) and bounded to 10 and 25 (about ⌈100/N⌉ s expected); all roles in this process (test/bench/pipeline.ts).
 * - 10.2: a map of 1,000 branches whose model answers at once, all at once and 100 at a time: the CPU of this process
 *   (the four roles, the submitter and the model stub) and of nats-server per branch (target ≤ 1 ms for the runtime),
 *   and the wall time.
 * - 10.3: scaling out: a map of 200 branches (model over HTTP from the mock server, answering after 200 ms) on 1, 2
 *   and 4 Handler processes of concurrency 10 each (role processes from `dist`: `npm run build` first). The queue
 *   group hands each request to a random Handler, which queues what exceeds its concurrency.
 * Sizes: `BENCH_MAP_BRANCHES` (100), `BENCH_MAP_TRIVIAL_BRANCHES` (1000), `BENCH_MAP_SCALE_OUT_BRANCHES` (200),
 * `BENCH_MAP_REPEATS` (3).
 */
import { afterAll, beforeAll, bench, describe } from "vitest";
import type { CallModel } from "../../actors/model.js";
import { createSubjects } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { startPipeline, startSubmitter, stubModel, type SubmittedTask } from "./pipeline.js";
import { figureOf, fmt, median, once, processCpuUs, record, WHOLE } from "./results.js";

const BRANCHES = Number(process.env.BENCH_MAP_BRANCHES ?? 100);
const TRIVIAL_BRANCHES = Number(process.env.BENCH_MAP_TRIVIAL_BRANCHES ?? 1000);
const SCALE_OUT_BRANCHES = Number(process.env.BENCH_MAP_SCALE_OUT_BRANCHES ?? 200);
const REPEATS = Number(process.env.BENCH_MAP_REPEATS ?? 3);
/** The model's delay in 10.1 and 10.3, ms. */
const SLOW_MODEL_MS = 1000;
const SCALE_OUT_MODEL_MS = 200;
/** Sessions at once per Handler process in 10.3. */
const SCALE_OUT_CONCURRENCY = 10;
/** The largest `max_parallel` a map accepts. */
const MAX_PARALLEL = 1000;

/** One task: a map over `items` (`branches` elements), every branch at once (up to the largest `max_parallel`). */
function mapTask(branches: number, maxParallel = Math.min(branches, MAX_PARALLEL)): SubmittedTask {
  const xml =
    `<task type="map" over="items" max_parallel="${maxParallel}">` +
    `<steps><task><description>Answer with the word ok for {{item}}.</description></task></steps></task>`;
  return { xml, inputs: { items: Array.from({ length: branches }, (_, i) => `item ${i}`) } };
}

/** `model`, counting its calls in `counter.calls`. */
function counted(model: CallModel, counter: { calls: number }): CallModel {
  return (request, signal) => {
    counter.calls++;
    return model(request, signal);
  };
}

/** Fails unless the model was called `expected` times since `counter` was reset (a failed branch would not call it). */
function checkCalls(counter: { calls: number }, expected: number, what: string): void {
  if (counter.calls !== expected) throw new Error(`${what}: ${counter.calls} model calls, expected ${expected}`);
  counter.calls = 0;
}

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

describe("fan-out: map branches", () => {
  bench(
    "10.1 map of 100 branches, model answers after 1 s, by Handler concurrency",
    once(async () => {
      const workload = `10 fan-out: a map of ${BRANCHES} branches, model answers after 1 s (in-process roles)`;
      const counter = { calls: 0 };
      const walls: Record<number, number[]> = {};
      const levels = [Math.max(BRANCHES, 100), 25, 10];
      for (const concurrency of levels) {
        const pipeline = await startPipeline(server.url, {
          concurrency,
          taskParallelism: Math.max(BRANCHES, 64),
          callModel: counted(stubModel(SLOW_MODEL_MS), counter),
          task: mapTask(BRANCHES),
        });
        try {
          // Warm-up on the first pipeline only (the code is shared by all).
          if (concurrency === levels[0]) await pipeline.latency();
          counter.calls = 0;
          const list: number[] = (walls[concurrency] = []);
          for (let i = 0; i < REPEATS; i++) {
            list.push((await pipeline.latency()) / 1000);
            checkCalls(counter, BRANCHES, workload);
          }
        } finally {
          await pipeline.stop();
        }
      }
      levels.forEach((concurrency, i) => {
        const wall = walls[concurrency] ?? [];
        const ideal = Math.ceil(BRANCHES / concurrency) * (SLOW_MODEL_MS / 1000);
        const all = i === 0;
        record({
          order: 10.1 + i / 100,
          workload,
          variant: all
            ? `submit → result, Handler concurrency ${concurrency}, max_parallel ${Math.min(BRANCHES, MAX_PARALLEL)}, task parallelism ${Math.max(BRANCHES, 64)}`
            : `submit → result, Handler concurrency ${concurrency}`,
          unit: "s",
          figure: figureOf(wall),
          ...(all ? { target: "< 1.5 s", met: median(wall) < 1.5 } : {}),
          note: `(floor: ${fmt(ideal)} s, ⌈${BRANCHES}/${Math.min(concurrency, BRANCHES)}⌉ model delays)`,
        });
      });
    }),
    WHOLE,
  );

  bench(
    "10.2 map of 1,000 trivial branches: CPU per branch",
    once(async () => {
      const workload = `10 fan-out: a map of ${TRIVIAL_BRANCHES} branches, model answers at once (in-process roles)`;
      // Every branch at once, and 100 at a time (Handler concurrency the same).
      const levels = [...new Set([Math.min(TRIVIAL_BRANCHES, MAX_PARALLEL), Math.min(TRIVIAL_BRANCHES, 100)])];
      for (const [k, maxParallel] of levels.entries()) {
        const run = await trivialMap(maxParallel);
        const perBranch = median(run.cpu);
        const order = 10.2 + k / 10 / 2;
        record({
          order,
          workload,
          variant: `max_parallel and Handler concurrency ${maxParallel}: CPU of this process per branch (the four roles, the submitter and the stub model; all threads)`,
          unit: "ms",
          figure: figureOf(run.cpu),
          target: "≤ 1 ms",
          met: perBranch <= 1,
        });
        record({
          order: order + 0.001,
          workload,
          variant: `max_parallel ${maxParallel}: CPU of nats-server per branch`,
          unit: "ms",
          figure: figureOf(run.serverCpu),
        });
        record({
          order: order + 0.002,
          workload,
          variant: `max_parallel ${maxParallel}: submit → result`,
          unit: "s",
          figure: figureOf(run.wall),
        });
      }
    }),
    WHOLE,
  );

  bench(
    "10.3 map of 200 branches on 1, 2 and 4 Handler processes",
    once(async () => {
      const workload = `10 fan-out: a map of ${SCALE_OUT_BRANCHES} branches on Handler processes (${SCALE_OUT_CONCURRENCY} sessions each, mock model over HTTP answering after ${SCALE_OUT_MODEL_MS} ms)`;
      const mock: MockLlmServer = await startMockLlm({ port: 0, script: { rules: [{ reply: "ok", delayMs: SCALE_OUT_MODEL_MS }] } });
      const walls: Record<number, number[]> = {};
      try {
        for (const handlers of [1, 2, 4]) {
          const run = await scaleOut(server.url, mock, handlers);
          walls[handlers] = run.walls;
          const ideal = Math.ceil(SCALE_OUT_BRANCHES / (handlers * SCALE_OUT_CONCURRENCY)) * (SCALE_OUT_MODEL_MS / 1000);
          const versus = handlers > 1 && walls[1] ? `, ${fmt(median(walls[1]) / median(run.walls))}× faster than one` : "";
          record({
            order: 10.3 + handlers / 100,
            workload,
            variant: `${handlers} Handler process${handlers > 1 ? "es" : ""}: submit → result`,
            unit: "s",
            figure: figureOf(run.walls),
            note: `(floor ${fmt(ideal)} s; busiest Handler ran ${fmt(median(run.busiest))} of ${SCALE_OUT_BRANCHES} sessions${versus})`,
          });
        }
      } finally {
        await mock.close();
      }
    }),
    WHOLE,
  );
});

/**
 * The map of {@link TRIVIAL_BRANCHES} branches whose model answers at once, `maxParallel` at a time, {@link REPEATS}
 * runs after a warm-up: per run, the wall time (s) and the CPU (ms per branch) of this process and of nats-server.
 */
async function trivialMap(maxParallel: number): Promise<{ wall: number[]; cpu: number[]; serverCpu: number[] }> {
  const counter = { calls: 0 };
  const pipeline = await startPipeline(server.url, {
    concurrency: maxParallel,
    taskParallelism: TRIVIAL_BRANCHES,
    callModel: counted(stubModel(), counter),
    task: mapTask(TRIVIAL_BRANCHES, maxParallel),
  });
  const wall: number[] = [];
  const cpu: number[] = [];
  const serverCpu: number[] = [];
  try {
    await pipeline.latency(); // warm-up
    counter.calls = 0;
    for (let i = 0; i < REPEATS; i++) {
      globalThis.gc?.();
      const serverBefore = processCpuUs(server.pid);
      const before = process.cpuUsage();
      wall.push((await pipeline.latency()) / 1000);
      const used = process.cpuUsage(before);
      const serverAfter = processCpuUs(server.pid);
      cpu.push((used.user + used.system) / 1000 / TRIVIAL_BRANCHES);
      if (serverBefore !== undefined && serverAfter !== undefined) serverCpu.push((serverAfter - serverBefore) / 1000 / TRIVIAL_BRANCHES);
      checkCalls(counter, TRIVIAL_BRANCHES, `a map of ${TRIVIAL_BRANCHES} trivial branches`);
    }
  } finally {
    await pipeline.stop();
  }
  return { wall, cpu, serverCpu };
}

/**
 * The map of {@link SCALE_OUT_BRANCHES} on `handlers` Handler processes (plus one Memory, Evaluator and Director
 * process), {@link REPEATS} runs after a warm-up. Each Handler uses its own API key, so the mock's requests tell
 * which Handler made them.
 */
async function scaleOut(url: string, mock: MockLlmServer, handlers: number): Promise<{ walls: number[]; busiest: number[] }> {
  const root = randomRoot();
  const env = (extra: Record<string, string> = {}) => ({
    OPENAI_BASE_URL: mock.url,
    OPENAI_API_KEY: "bench",
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_LOG_LEVEL: "info",
    DIRIGENT_TASK_PARALLELISM: String(SCALE_OUT_BRANCHES),
    ...extra,
  });
  const processes: CliProcess[] = [];
  const worker = async (role: string, concurrency: number, extra?: Record<string, string>) => {
    const p = startCli(["worker", "--role", role, "--nats", url, "--prefix", root, "--concurrency", String(concurrency)], env(extra));
    processes.push(p);
    await p.waitFor(/ready/, 30_000);
  };
  const walls: number[] = [];
  const busiest: number[] = [];
  const submitter = await startSubmitter(url, createSubjects(root), mapTask(SCALE_OUT_BRANCHES));
  try {
    await Promise.all([worker("memory", 8), worker("evaluator", 8)]);
    await Promise.all(
      Array.from({ length: handlers }, (_, i) => worker("handler", SCALE_OUT_CONCURRENCY, { OPENAI_API_KEY: `bench-h${i}` })),
    );
    await worker("director", 8);
    await submitter.latency(); // warm-up
    for (let i = 0; i < REPEATS; i++) {
      const from = mock.requests.length;
      walls.push((await submitter.latency()) / 1000);
      const requests = mock.requests.slice(from);
      if (requests.length !== SCALE_OUT_BRANCHES)
        throw new Error(`${handlers} Handlers: ${requests.length} model calls, expected ${SCALE_OUT_BRANCHES}`);
      const byHandler = new Map<string, number>();
      for (const r of requests) byHandler.set(String(r.headers.authorization), (byHandler.get(String(r.headers.authorization)) ?? 0) + 1);
      busiest.push(Math.max(...byHandler.values()));
      console.log(
        `[bench] ${handlers} Handlers, run ${i + 1}: sessions per Handler ${[...byHandler.values()].sort((a, b) => b - a).join(", ")}`,
      );
    }
  } finally {
    await submitter.stop();
    await Promise.all(processes.map((p) => p.stop()));
  }
  return { walls, busiest };
}
