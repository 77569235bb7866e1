/**
 * Workloads 1–3 of `npm run bench` (issue 8): trivial-task throughput and latency through the full durable
 * pipeline against BullMQ on a private Redis, against a raw NATS round trip and against the same messages sent
 * by hand without the runtime (test/bench/raw-pipeline.ts), and 10,000 tasks in flight whose
 * model answers after 1 s. Each comparison alternates its variants after a warm-up and repeats; the rows go to the
 * table of BENCHMARKS.md (test/bench/global-setup.ts). Sizes can be lowered for a quick look with
 * `BENCH_TASKS`, `BENCH_LATENCY_TASKS` and `BENCH_SCALE_TASKS`.
 */
import { afterAll, beforeAll, bench, describe } from "vitest";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { bullLatencies, bullThroughput, hasRedis, startTestRedis, type TestRedis } from "./bullmq.js";
import { heldMachinesHeapPerTask, machinesPerTask } from "./machines-floor.js";
import { gatedModel, startPipeline, stubModel, type GatedModel, type Pipeline, type Submitter } from "./pipeline.js";
import { startRawPipeline } from "./raw-pipeline.js";
import { alternate, figureOf, fmt, median, once, percentile, processCpuUs, record, WHOLE } from "./results.js";

const REPEATS = 5;
const TASKS = Number(process.env.BENCH_TASKS ?? 1000);
const LATENCY_TASKS = Number(process.env.BENCH_LATENCY_TASKS ?? 300);
const SCALE_TASKS = Number(process.env.BENCH_SCALE_TASKS ?? 10_000);
/** Roles' concurrency in the scale run: every task in flight at once. */
const SCALE_CONCURRENCY = SCALE_TASKS;
/** Row 3.23: tasks held with an input of 10 KB (text) substituted into their prompt. */
const INPUT_TASKS = Math.min(SCALE_TASKS, 2000);
const INPUT_TEXT = "abcdefghi ".repeat(1000);
const INPUT_TASK = '<task type="atomic"><description>Summarise: {{text}}</description></task>';
const SCALE_WORKLOAD = `3 scale (${SCALE_TASKS} tasks submitted at once, model answers after 1 s, roles' concurrency ${SCALE_CONCURRENCY})`;

/**
 * KB of live heap per task: `count` tasks submitted through `submitter`, all held inside `model`'s call, after a full
 * GC (`--expose-gc`); then the model answers and every result is awaited.
 */
async function heldHeapPerTask(submitter: Submitter, model: GatedModel, count: number): Promise<number> {
  globalThis.gc?.();
  const base = process.memoryUsage().heapUsed;
  const results = await submitter.submitAll(count);
  await model.held(count);
  globalThis.gc?.();
  const live = (process.memoryUsage().heapUsed - base) / count / 1024;
  model.open();
  await Promise.all(results);
  return live;
}

let server: TestNatsServer;
let redis: TestRedis | undefined;
let pipeline: Pipeline;
/** The same messages as a dirigent task, written by hand without the runtime (test/bench/raw-pipeline.ts). */
let raw: { clients: Submitter; wire: Submitter };

beforeAll(async () => {
  server = await startTestNatsServer();
  if (hasRedis()) redis = await startTestRedis();
  else console.log("[bench] redis-server is not on PATH: the BullMQ columns are skipped");
  pipeline = await startPipeline(server.url, { concurrency: 64, callModel: stubModel() });
  raw = {
    clients: await startRawPipeline(server.url, { concurrency: 64, io: "clients" }),
    wire: await startRawPipeline(server.url, { concurrency: 64, io: "wire" }),
  };
});

afterAll(async () => {
  await raw?.clients.stop();
  await raw?.wire.stop();
  await pipeline?.stop();
  await redis?.stop();
  await server?.stop();
});

const skipped = "skipped: redis-server not on PATH";

/**
 * `run`, adding to `into` the CPU this process spent on it per task (user + system, all threads), `tasks` tasks a run,
 * and to `server.into` the CPU the server process `server.pid` spent in the same time.
 */
function withCpu<T>(
  into: number[] | undefined,
  tasks: number,
  run: () => Promise<T>,
  server?: { pid: number; into: number[] | undefined },
): () => Promise<T> {
  return async () => {
    const serverBefore = server && processCpuUs(server.pid);
    const before = process.cpuUsage();
    const result = await run();
    const used = process.cpuUsage(before);
    const serverAfter = server && processCpuUs(server.pid);
    into?.push((used.user + used.system) / tasks);
    if (serverBefore !== undefined && serverAfter !== undefined) server?.into?.push((serverAfter - serverBefore) / tasks);
    return result;
  };
}

/** Submit → result of `LATENCY_TASKS` tasks one after the other, ms each. */
async function oneAtATime(submitter: Submitter): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_TASKS; i++) samples.push(await submitter.latency());
  return samples;
}

describe("dirigent vs BullMQ vs raw NATS", () => {
  bench(
    "1 trivial-task throughput",
    once(async () => {
      // The CPU this process spends per task (user + system, all threads) in the same runs: the NATS or Redis
      // server's own is not in it.
      const cpu: Record<string, number[]> = { dirigent: [], bullmq: [], wire: [] };
      // The servers' own CPU in the same runs: nats-server's for dirigent and the raw pipeline over its wire, Redis's for BullMQ.
      const serverCpu: Record<string, number[]> = { dirigent: [], bullmq: [], wire: [] };
      const variants: Record<string, () => Promise<number>> = {
        dirigent: withCpu(cpu.dirigent, TASKS, () => pipeline.throughput(TASKS), { pid: server.pid, into: serverCpu.dirigent }),
        clients: () => raw.clients.throughput(TASKS),
        wire: withCpu(cpu.wire, TASKS, () => raw.wire.throughput(TASKS), { pid: server.pid, into: serverCpu.wire }),
      };
      if (redis) {
        const connection = redis.connection;
        variants["bullmq"] = withCpu(cpu.bullmq, TASKS, () => bullThroughput(connection, TASKS, 50), {
          pid: redis.pid,
          into: serverCpu.bullmq,
        });
      }
      const runs = await alternate(variants, REPEATS);
      // The warm-up round is the first entry of each list.
      for (const list of [...Object.values(cpu), ...Object.values(serverCpu)]) list.shift();
      const ours = runs["dirigent"] ?? [];
      const theirs = runs["bullmq"];
      const ratio = theirs ? median(ours) / median(theirs) : undefined;
      const workload = `1 trivial-task throughput (${TASKS} at once)`;
      record({
        order: 1.1,
        workload,
        variant: "dirigent: NATS submit → JetStream intake → Director → Evaluator → Handler (stub model) → result",
        unit: "tasks/s",
        figure: figureOf(ours),
        target: "≥ 1.0× BullMQ",
        ...(ratio === undefined ? { note: "(no BullMQ to compare)" } : { met: ratio >= 1, note: `(${fmt(ratio)}× BullMQ)` }),
      });
      if (theirs)
        record({ order: 1.2, workload, variant: "BullMQ add + process, worker concurrency 50", unit: "jobs/s", figure: figureOf(theirs) });
      else record({ order: 1.2, workload, variant: "BullMQ add + process", unit: "jobs/s", note: skipped });
      const versus = (runs: number[]) => (theirs ? { note: `(${fmt(median(runs) / median(theirs))}× BullMQ)` } : {});
      const clients = runs["clients"] ?? [];
      const wire = runs["wire"] ?? [];
      record({
        order: 1.21,
        workload,
        variant: `raw NATS, no runtime: the same messages and stores, by hand with nats.js' JetStream and KV clients`,
        unit: "tasks/s",
        figure: figureOf(clients),
        ...versus(clients),
      });
      record({
        order: 1.22,
        workload,
        variant: `raw NATS, no runtime: the same messages and stores over dirigent's wire and intake pull`,
        unit: "tasks/s",
        figure: figureOf(wire),
        ...versus(wire),
      });
      record({
        order: 1.3,
        workload,
        variant: "dirigent: CPU of this process per task (submitter and the four roles; nats-server's not included)",
        unit: "µs",
        figure: figureOf(cpu["dirigent"] ?? []),
      });
      record({
        order: 1.31,
        workload,
        variant: "dirigent: CPU of nats-server per task",
        unit: "µs",
        figure: figureOf(serverCpu["dirigent"] ?? []),
      });
      record({
        order: 1.35,
        workload,
        variant: "raw NATS over dirigent's wire: CPU of this process per task",
        unit: "µs",
        figure: figureOf(cpu["wire"] ?? []),
      });
      record({
        order: 1.36,
        workload,
        variant: "raw NATS over dirigent's wire: CPU of nats-server per task",
        unit: "µs",
        figure: figureOf(serverCpu["wire"] ?? []),
      });
      if (theirs)
        record({
          order: 1.4,
          workload,
          variant: "BullMQ: CPU of this process per job (queue and worker; Redis's not included)",
          unit: "µs",
          figure: figureOf(cpu["bullmq"] ?? []),
        });
      if (theirs)
        record({ order: 1.41, workload, variant: "BullMQ: CPU of Redis per job", unit: "µs", figure: figureOf(serverCpu["bullmq"] ?? []) });
      // The floor: what the three machines of one such task cost in XState alone, with effects that answer at once.
      const floor: number[] = [];
      for (let i = 0; i < 3; i++) floor.push(await machinesPerTask());
      record({
        order: 1.5,
        workload,
        variant: "floor: the task's three machines alone (task, evaluation, session; no I/O), per task",
        unit: "µs",
        figure: figureOf(floor),
      });
    }),
    WHOLE,
  );

  bench(
    "2 trivial-task latency",
    once(async () => {
      const p50: Record<string, number[]> = { dirigent: [], nats: [], bullmq: [], clients: [], wire: [] };
      const p99: Record<string, number[]> = { dirigent: [], nats: [], bullmq: [], clients: [], wire: [] };
      // CPU of this process per task, one at a time (what a task costs when nothing is shared between tasks).
      const cpu: Record<string, number[]> = { dirigent: [], bullmq: [] };
      const serverCpu: Record<string, number[]> = { dirigent: [], bullmq: [] };
      const note = (name: string, samples: number[]) => {
        p50[name]?.push(percentile(samples, 50));
        p99[name]?.push(percentile(samples, 99));
        return percentile(samples, 50);
      };
      const echo = pipeline.transport.bus.subscribe(`${pipeline.subjects.submit}.echo`, (msg) => void msg.respond(msg.data));
      await pipeline.transport.bus.flush();
      const natsRound = async () => {
        const samples: number[] = [];
        const body = new TextEncoder().encode('{"ping":true}');
        for (let i = 0; i < LATENCY_TASKS; i++) {
          const start = performance.now();
          await pipeline.client.request(`${pipeline.subjects.submit}.echo`, body, { timeoutMs: 5000 });
          samples.push(performance.now() - start);
        }
        return samples;
      };
      const variants: Record<string, () => Promise<number>> = {
        dirigent: withCpu(
          cpu.dirigent,
          LATENCY_TASKS,
          async () => {
            return note("dirigent", await oneAtATime(pipeline));
          },
          { pid: server.pid, into: serverCpu.dirigent },
        ),
        nats: async () => note("nats", await natsRound()),
        clients: async () => note("clients", await oneAtATime(raw.clients)),
        wire: async () => note("wire", await oneAtATime(raw.wire)),
      };
      if (redis) {
        const connection = redis.connection;
        variants["bullmq"] = withCpu(
          cpu.bullmq,
          LATENCY_TASKS,
          async () => note("bullmq", await bullLatencies(connection, LATENCY_TASKS, 50)),
          { pid: redis.pid, into: serverCpu.bullmq },
        );
      }
      await alternate(variants, REPEATS);
      await echo.unsubscribe();
      // The warm-up round is the first entry of each list.
      for (const list of [...Object.values(p50), ...Object.values(p99), ...Object.values(cpu), ...Object.values(serverCpu)]) list.shift();
      const workload = `2 trivial-task latency (${LATENCY_TASKS} one at a time)`;
      const ours = median(p50["dirigent"] ?? []);
      const theirs = redis ? median(p50["bullmq"] ?? []) : undefined;
      const within = theirs === undefined ? ours <= 1 : ours <= 1 && ours <= 2 * theirs;
      record({
        order: 2.1,
        workload,
        variant: "dirigent submit → result, p50",
        unit: "ms",
        figure: figureOf(p50["dirigent"] ?? []),
        target: "≤ 1 ms and ≤ 2× BullMQ p50",
        met: within,
        ...(theirs === undefined ? {} : { note: `(${fmt(ours / theirs)}× BullMQ)` }),
      });
      record({ order: 2.2, workload, variant: "dirigent submit → result, p99", unit: "ms", figure: figureOf(p99["dirigent"] ?? []) });
      record({ order: 2.3, workload, variant: "raw NATS request/reply round trip, p50", unit: "ms", figure: figureOf(p50["nats"] ?? []) });
      record({ order: 2.4, workload, variant: "raw NATS request/reply round trip, p99", unit: "ms", figure: figureOf(p99["nats"] ?? []) });
      record({
        order: 2.41,
        workload,
        variant: "raw NATS, no runtime, nats.js' JetStream and KV clients: submit → result, p50",
        unit: "ms",
        figure: figureOf(p50["clients"] ?? []),
      });
      record({
        order: 2.42,
        workload,
        variant: "raw NATS, no runtime, over dirigent's wire: submit → result, p50",
        unit: "ms",
        figure: figureOf(p50["wire"] ?? []),
      });
      record({
        order: 2.7,
        workload,
        variant: "dirigent: CPU of this process per task, one at a time (submitter and the four roles)",
        unit: "µs",
        figure: figureOf(cpu["dirigent"] ?? []),
      });
      record({
        order: 2.71,
        workload,
        variant: "dirigent: CPU of nats-server per task, one at a time",
        unit: "µs",
        figure: figureOf(serverCpu["dirigent"] ?? []),
      });
      if (redis)
        record({
          order: 2.8,
          workload,
          variant: "BullMQ: CPU of this process per job, one at a time (queue, worker and QueueEvents)",
          unit: "µs",
          figure: figureOf(cpu["bullmq"] ?? []),
        });
      if (redis)
        record({
          order: 2.81,
          workload,
          variant: "BullMQ: CPU of Redis per job, one at a time",
          unit: "µs",
          figure: figureOf(serverCpu["bullmq"] ?? []),
        });
      if (redis) {
        record({
          order: 2.5,
          workload,
          variant: "BullMQ add → completed (QueueEvents), p50",
          unit: "ms",
          figure: figureOf(p50["bullmq"] ?? []),
        });
        record({
          order: 2.6,
          workload,
          variant: "BullMQ add → completed (QueueEvents), p99",
          unit: "ms",
          figure: figureOf(p99["bullmq"] ?? []),
        });
      } else record({ order: 2.5, workload, variant: "BullMQ add → completed", unit: "ms", note: skipped });
    }),
    WHOLE,
  );

  bench(
    "3 scale: tasks in flight, model answers after 1 s",
    once(async () => {
      const scale = await startPipeline(server.url, { concurrency: SCALE_CONCURRENCY, callModel: stubModel(1000) });
      try {
        await scale.throughput(Math.min(SCALE_CONCURRENCY, 1000)); // warm-up
        globalThis.gc?.();
        const base = process.memoryUsage().heapUsed;
        let peak = base;
        const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 50);
        const start = performance.now();
        await scale.throughput(SCALE_TASKS);
        const wall = (performance.now() - start) / 1000;
        clearInterval(sampler);
        const perTask = (peak - base) / SCALE_TASKS / 1024;
        record({
          order: 3.1,
          workload: SCALE_WORKLOAD,
          variant: "wall time until every result",
          unit: "s",
          figure: figureOf([wall]),
          target: "≤ 3 s (issue 34)",
          met: wall <= 3,
          note: `(floor: the model's 1 s)`,
        });
        record({
          order: 3.3,
          workload: SCALE_WORKLOAD,
          variant: "peak heap growth per task submitted, garbage included (sampled every 50 ms)",
          unit: "KB",
          figure: figureOf([perTask]),
        });
      } finally {
        await scale.stop();
      }
      // Live heap: every task held inside its model call at once, then a full GC.
      const model = gatedModel();
      const held = await startPipeline(server.url, { concurrency: SCALE_CONCURRENCY, callModel: model.callModel });
      try {
        const live = await heldHeapPerTask(held, model, SCALE_TASKS);
        record({
          order: 3.2,
          workload: SCALE_WORKLOAD,
          variant: `live heap per task in flight: all ${SCALE_TASKS} inside their model call, after a full GC (submitter included)`,
          unit: "KB",
          figure: figureOf([live]),
          target: "≤ 30 KB (issue 34)",
          met: live <= 30,
        });
      } finally {
        await held.stop();
      }
      // What a task's inputs add: the same, with a 10 KB input substituted into the prompt.
      const inputModel = gatedModel();
      const withInput = await startPipeline(server.url, {
        concurrency: SCALE_CONCURRENCY,
        callModel: inputModel.callModel,
        task: { xml: INPUT_TASK, inputs: { text: INPUT_TEXT } },
      });
      try {
        const live = await heldHeapPerTask(withInput, inputModel, INPUT_TASKS);
        record({
          order: 3.23,
          workload: SCALE_WORKLOAD,
          variant: `live heap per task in flight with a ${INPUT_TEXT.length / 1000} KB input in its prompt: ${INPUT_TASKS} inside their model call, after a full GC (submitter included)`,
          unit: "KB",
          figure: figureOf([live]),
        });
      } finally {
        await withInput.stop();
      }
      // The floors under 3.2. The same task's messages by hand over dirigent's wire, held where the model call is.
      const rawModel = gatedModel();
      const rawHeld = await startRawPipeline(server.url, {
        concurrency: SCALE_CONCURRENCY,
        io: "wire",
        model: rawModel.pass,
      });
      try {
        const live = await heldHeapPerTask(rawHeld, rawModel, SCALE_TASKS);
        record({
          order: 3.22,
          workload: SCALE_WORKLOAD,
          variant:
            "floor: the task's messages by hand over dirigent's wire (no runtime), held where the model call is, live heap per task (submitter included)",
          unit: "KB",
          figure: figureOf([live]),
        });
      } finally {
        await rawHeld.stop();
      }
      // The XState actors a task keeps while its model call is out, alone.
      const floor: number[] = [];
      for (let i = 0; i < 3; i++) floor.push(heldMachinesHeapPerTask(SCALE_TASKS));
      record({
        order: 3.21,
        workload: SCALE_WORKLOAD,
        variant:
          "floor: the XState actors of a task in its model call alone (the Director's run and task machines, the evaluation, the session, and the effects they wait on), live heap per task",
        unit: "KB",
        figure: figureOf(floor),
      });
    }),
    WHOLE,
  );
});
