/**
 * Workloads 11–13 of `npm run bench` (issue 21): the user level. `dirigent up` as its own process, BullMQ's worker
 * as its own process, a LangGraph.js graph durable on PostgreSQL as its own process, and the durable-execution peers
 * DBOS (on PostgreSQL) and Restate (its own server) in processes of their own (./durable/), each task or job making
 * one chat-completions call over HTTP to a model server answering at once (a process of its own); the bench process
 * submits and awaits results as a user in another process would. They alternate in one run (A B C, C B A, …) after a
 * warm-up round. Sizes: `BENCH_USER_TASKS` (default `BENCH_TASKS`, else 1000), `BENCH_USER_LATENCY_TASKS` (default
 * 200), `BENCH_USER_REPEATS` (3), `BENCH_USER_CONCURRENCY` (64), `BENCH_SEQUENTIAL_TASKS` (50). Rows 11.7 and 11.71 are
 * the floor: the model call alone, in the bench process (./floor.ts).
 */
import { afterAll, beforeAll, bench, describe } from "vitest";
import { startTestNatsServer, type TestNatsServer } from "../../support/nats-server.js";
import { hasRedis, startTestRedis, type TestRedis } from "../bullmq.js";
import { alternate, figureOf, fmt, median, once, percentile, postgresCpuUs, record, WHOLE } from "../results.js";
import { startBull } from "./bullmq.js";
import { startDirigent, type Contender, type Dirigent, type Sequential } from "./dirigent.js";
import { postgresMissing, startLangGraph } from "./langgraph.js";
import { startModelServer, type ModelServer } from "./model.js";
import { modelCallFloor } from "./floor.js";
import { marginalStepMs, ratio, stepOverheadMs } from "./stats.js";
import { withCpu } from "./processes.js";
import {
  addPeers,
  langGraphPeer,
  perRound,
  recordLatency,
  recordOr,
  recordSteps,
  recordThroughput,
  startPeers,
  stopPeers,
  versusPeers,
  type Peer,
} from "./durable/peers.js";

const TASKS = Number(process.env.BENCH_USER_TASKS ?? process.env.BENCH_TASKS ?? 1000);
const LATENCY_TASKS = Number(process.env.BENCH_USER_LATENCY_TASKS ?? 200);
const REPEATS = Number(process.env.BENCH_USER_REPEATS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_USER_CONCURRENCY ?? 64);
const SEQUENTIAL_TASKS = Number(process.env.BENCH_SEQUENTIAL_TASKS ?? 50);
const STEPS = 10;
/** Calls of each floor sample (rows 11.7 and 11.71). */
const FLOOR_CALLS = 2000;

let nats: TestNatsServer;
let model: ModelServer;
let redis: TestRedis | undefined;
let dirigent: Dirigent;
let bull: Contender | undefined;
let langgraph: Sequential | undefined;
let peers: Peer[] | undefined;
let noBull = "skipped: redis-server not on PATH";
let noLangGraph = "";

beforeAll(async () => {
  nats = await startTestNatsServer();
  model = await startModelServer();
  dirigent = await startDirigent(nats.url, model.url, CONCURRENCY, STEPS);
  if (hasRedis()) {
    redis = await startTestRedis();
    bull = await startBull(redis, model.url, CONCURRENCY).catch((error: unknown) => {
      noBull = `skipped: the BullMQ worker did not start (${String(error).slice(0, 200)})`;
      return undefined;
    });
  }
  const missing = await postgresMissing();
  if (missing === undefined)
    langgraph = await startLangGraph(model.url, CONCURRENCY, STEPS).catch((error: unknown) => {
      noLangGraph = `skipped: the LangGraph.js worker did not start (${String(error).slice(0, 200)})`;
      return undefined;
    });
  else noLangGraph = `skipped: PostgreSQL not reachable (${missing}); set BENCH_PG_URL`;
  if (!bull) console.log(`[bench] ${noBull}`);
  if (!langgraph) console.log(`[bench] ${noLangGraph}`);
  peers = await startPeers(model.url, CONCURRENCY, STEPS, missing);
});

afterAll(async () => {
  await stopPeers(peers);
  await langgraph?.stop();
  await bull?.stop();
  await dirigent?.stop();
  await redis?.stop();
  await model?.stop();
  await nats?.stop();
});

/** `(0.5× BullMQ, 3.1× LangGraph.js, 1.2× DBOS, 1.1× Restate)` of the medians. */
function versus(ours: number, bullValue: number | undefined, graphValue: number | undefined, runs: Record<string, number[]>): string {
  const parts = [
    bullValue === undefined ? undefined : `${fmt(ours / bullValue)}× BullMQ`,
    graphValue === undefined ? undefined : `${fmt(ours / graphValue)}× LangGraph.js`,
    ...versusPeers(ours, peers ?? [], runs),
  ].filter(Boolean);
  return parts.length ? `(${parts.join(", ")})` : "(no other runtime to compare)";
}

describe("user level: dirigent up vs BullMQ, LangGraph.js, DBOS and Restate, model over HTTP", () => {
  bench(
    "11 user-level throughput",
    once(async () => {
      const cpu = {
        dirigent: [] as number[],
        nats: [] as number[],
        bull: [] as number[],
        redis: [] as number[],
        graph: [] as number[],
        pg: [] as number[],
      };
      const variants: Record<string, () => Promise<number>> = {
        dirigent: withCpu(TASKS, () => dirigent.throughput(TASKS), [
          { pid: dirigent.pid, list: cpu.dirigent },
          { pid: nats.pid, list: cpu.nats },
        ]),
      };
      if (bull && redis) {
        const b = bull;
        variants["bullmq"] = withCpu(TASKS, () => b.throughput(TASKS), [
          { pid: b.pid, list: cpu.bull },
          { pid: redis.pid, list: cpu.redis },
        ]);
      }
      if (langgraph) {
        const g = langgraph;
        variants["langgraph"] = withCpu(TASKS, () => g.throughput(TASKS), [
          { pid: g.pid, list: cpu.graph },
          { pid: postgresCpuUs, list: cpu.pg },
        ]);
      }
      const peerCpu: Record<string, number[][]> = {};
      addPeers(
        peers,
        variants,
        (p) => p.key,
        TASKS,
        (c) => () => c.throughput(TASKS),
        peerCpu,
      );
      const runs = await alternate(variants, REPEATS);
      for (const list of [...Object.values(cpu), ...Object.values(peerCpu).flat()]) list.shift(); // the warm-up round's
      const ours = runs["dirigent"] ?? [];
      const theirs = runs["bullmq"];
      const graph = runs["langgraph"];
      const toBull = ratio(median(ours), theirs && median(theirs));
      const toGraph = ratio(median(ours), graph && median(graph));
      const workload = `11 user-level throughput (${TASKS} at once, concurrency ${CONCURRENCY}, model over HTTP answering at once)`;
      record({
        order: 11.1,
        workload,
        variant: "dirigent: `dirigent up` process; NATS submit → result, one model call through the openai SDK",
        unit: "tasks/s",
        figure: figureOf(ours),
        target: "≥ 0.7× BullMQ and ≥ 4× LangGraph.js (issue 34)",
        note: versus(median(ours), theirs && median(theirs), graph && median(graph), runs),
        ...(toBull === undefined && toGraph === undefined ? {} : { met: (toBull ?? Infinity) >= 0.7 && (toGraph ?? Infinity) >= 4 }),
      });
      recordOr(
        { order: 11.2, workload, variant: "BullMQ: worker process, job calls the model with fetch", unit: "jobs/s" },
        theirs,
        noBull,
      );
      recordOr(
        { order: 11.3, workload, variant: "LangGraph.js: one-node graph, PostgresSaver, openai SDK; runs over HTTP", unit: "runs/s" },
        graph,
        noLangGraph,
      );
      recordOr({ order: 11.4, workload, variant: "dirigent ÷ BullMQ, per round", unit: "×" }, theirs && perRound(ours, theirs), noBull);
      recordOr(
        { order: 11.5, workload, variant: "dirigent ÷ LangGraph.js, per round", unit: "×" },
        graph && perRound(ours, graph),
        noLangGraph,
      );
      recordThroughput(workload, peers ?? [], ours, runs, peerCpu);
      record({ order: 11.6, workload, variant: "dirigent: CPU of the `up` process per task", unit: "µs", figure: figureOf(cpu.dirigent) });
      record({ order: 11.61, workload, variant: "dirigent: CPU of nats-server per task", unit: "µs", figure: figureOf(cpu.nats) });
      recordOr({ order: 11.62, workload, variant: "BullMQ: CPU of the worker process per job", unit: "µs" }, bull && cpu.bull, noBull);
      recordOr({ order: 11.63, workload, variant: "BullMQ: CPU of Redis per job", unit: "µs" }, bull && cpu.redis, noBull);
      recordOr(
        { order: 11.64, workload, variant: "LangGraph.js: CPU of the worker process per run", unit: "µs" },
        langgraph && cpu.graph,
        noLangGraph,
      );
      recordOr(
        { order: 11.641, workload, variant: "LangGraph.js: CPU of PostgreSQL per run (all its processes, whoever they serve)", unit: "µs" },
        langgraph && cpu.pg,
        noLangGraph,
      );
      // The floor: the model call a task makes, alone, through the Handler's client and through fetch.
      const floor = { sdk: [] as number[], fetch: [] as number[] };
      for (let i = 0; i < REPEATS; i++) {
        const sample = await modelCallFloor(model.url, FLOOR_CALLS, CONCURRENCY);
        floor.sdk.push(sample.sdk);
        floor.fetch.push(sample.fetch);
      }
      const left = bull && cpu.bull.length ? median(cpu.bull) - median(floor.sdk) : undefined;
      record({
        order: 11.7,
        workload,
        variant: `floor: the model call a dirigent task makes (its messages and tool definitions), alone through the Handler's client (openai SDK over dirigent's HTTP/1.1 client), CPU per call, ${FLOOR_CALLS} calls ${CONCURRENCY} at once`,
        unit: "µs",
        figure: figureOf(floor.sdk),
        note:
          left === undefined
            ? ""
            : `(BullMQ's worker spends ${fmt(median(cpu.bull))} µs per job in all: ${fmt(left)} µs per task would be left for the rest of dirigent)`,
      });
      record({
        order: 11.71,
        workload,
        variant: "floor: the same request with fetch, as a BullMQ job makes its call, CPU per call",
        unit: "µs",
        figure: figureOf(floor.fetch),
      });
    }),
    WHOLE,
  );

  bench(
    "12 user-level latency and 13 a 10-step sequential task",
    once(async () => {
      const p50: Record<string, number[]> = { dirigent: [], bullmq: [], langgraph: [], model: [], sequential: [] };
      const p99: Record<string, number[]> = { dirigent: [], bullmq: [], langgraph: [] };
      const cpu = { dirigent: [] as number[], bull: [] as number[], graph: [] as number[], sequential: [] as number[] };
      /** `count` samples of `one`, one at a time; notes p50 and p99 under `name` and returns the p50. */
      const series = (name: string, count: number, one: () => Promise<number>) => async () => {
        const samples: number[] = [];
        for (let i = 0; i < count; i++) samples.push(await one());
        p50[name]?.push(percentile(samples, 50));
        p99[name]?.push(percentile(samples, 99));
        return percentile(samples, 50);
      };
      const variants: Record<string, () => Promise<number>> = {
        dirigent: withCpu(
          LATENCY_TASKS,
          series("dirigent", LATENCY_TASKS, () => dirigent.latency()),
          [{ pid: dirigent.pid, list: cpu.dirigent }],
        ),
        model: series("model", LATENCY_TASKS, () => model.roundTrip()),
        sequential: withCpu(
          SEQUENTIAL_TASKS,
          series("sequential", SEQUENTIAL_TASKS, () => dirigent.sequentialLatency()),
          [{ pid: dirigent.pid, list: cpu.sequential }],
        ),
      };
      if (bull) {
        const b = bull;
        variants["bullmq"] = withCpu(
          LATENCY_TASKS,
          series("bullmq", LATENCY_TASKS, () => b.latency()),
          [{ pid: b.pid, list: cpu.bull }],
        );
      }
      if (langgraph) {
        const g = langgraph;
        variants["langgraph"] = withCpu(
          LATENCY_TASKS,
          series("langgraph", LATENCY_TASKS, () => g.latency()),
          [{ pid: g.pid, list: cpu.graph }],
        );
      }
      // The peers: one-call tasks (`<key>`) and the sequential workflow (`<key>-steps`), in the same alternation.
      const peerCpu: Record<string, number[][]> = {};
      const stepsCpu: Record<string, number[][]> = {};
      const stepPeers = [langGraphPeer(langgraph, noLangGraph, STEPS), ...(peers ?? [])];
      for (const p of peers ?? []) if (p.contender) [p50[p.key], p99[p.key]] = [[], []];
      for (const p of stepPeers) if (p.contender) p50[`${p.key}-steps`] = [];
      addPeers(
        peers,
        variants,
        (p) => p.key,
        LATENCY_TASKS,
        (c, key) => series(key, LATENCY_TASKS, () => c.latency()),
        peerCpu,
      );
      addPeers(
        stepPeers,
        variants,
        (p) => `${p.key}-steps`,
        SEQUENTIAL_TASKS,
        (c, key) => series(key, SEQUENTIAL_TASKS, () => c.sequentialLatency()),
        stepsCpu,
      );
      await alternate(variants, REPEATS);
      const peerLists = [...Object.values(peerCpu), ...Object.values(stepsCpu)].flat();
      for (const list of [...Object.values(p50), ...Object.values(p99), ...Object.values(cpu), ...peerLists]) list.shift(); // warm-up
      const ours = p50["dirigent"] ?? [];
      const theirs = bull ? p50["bullmq"] : undefined;
      const graph = langgraph ? p50["langgraph"] : undefined;
      const toBull = ratio(median(ours), theirs && median(theirs));
      const workload = `12 user-level latency (${LATENCY_TASKS} one at a time, model over HTTP answering at once)`;
      record({
        order: 12.1,
        workload,
        variant: "dirigent: submit → result, p50",
        unit: "ms",
        figure: figureOf(ours),
        target: "≤ 1.5× BullMQ p50 (issue 34)",
        note: versus(median(ours), theirs && median(theirs), graph && median(graph), p50),
        ...(toBull === undefined ? {} : { met: toBull <= 1.5 }),
      });
      record({ order: 12.11, workload, variant: "dirigent: submit → result, p99", unit: "ms", figure: figureOf(p99["dirigent"] ?? []) });
      recordOr({ order: 12.2, workload, variant: "BullMQ: add → completed (QueueEvents), p50", unit: "ms" }, theirs, noBull);
      recordOr(
        { order: 12.21, workload, variant: "BullMQ: add → completed (QueueEvents), p99", unit: "ms" },
        bull && p99["bullmq"],
        noBull,
      );
      recordOr({ order: 12.3, workload, variant: "LangGraph.js: POST /run → answer, p50", unit: "ms" }, graph, noLangGraph);
      recordOr(
        { order: 12.31, workload, variant: "LangGraph.js: POST /run → answer, p99", unit: "ms" },
        langgraph && p99["langgraph"],
        noLangGraph,
      );
      recordOr({ order: 12.4, workload, variant: "dirigent ÷ BullMQ p50, per round", unit: "×" }, theirs && perRound(ours, theirs), noBull);
      recordOr(
        { order: 12.5, workload, variant: "dirigent ÷ LangGraph.js p50, per round", unit: "×" },
        graph && perRound(ours, graph),
        noLangGraph,
      );
      record({
        order: 12.6,
        workload,
        variant: "the model's round trip alone: openai SDK in the bench process → model server, p50",
        unit: "ms",
        figure: figureOf(p50["model"] ?? []),
      });
      record({
        order: 12.7,
        workload,
        variant: "dirigent: CPU of the `up` process per task, one at a time",
        unit: "µs",
        figure: figureOf(cpu.dirigent),
      });
      recordOr(
        { order: 12.71, workload, variant: "BullMQ: CPU of the worker process per job, one at a time", unit: "µs" },
        bull && cpu.bull,
        noBull,
      );
      recordOr(
        { order: 12.72, workload, variant: "LangGraph.js: CPU of the worker process per run, one at a time", unit: "µs" },
        langgraph && cpu.graph,
        noLangGraph,
      );
      recordLatency(workload, peers ?? [], ours, p50, p99, peerCpu);

      // 13: the sequential task, against the model's round trip and the one-step task measured in the same rounds.
      const sequential = p50["sequential"] ?? [];
      const modelMs = p50["model"] ?? [];
      const steps13 = `13 a ${STEPS}-step sequential task (${SEQUENTIAL_TASKS} one at a time, model over HTTP answering at once)`;
      const overhead = sequential.map((t, i) => stepOverheadMs(t, STEPS, modelMs[i] ?? Number.NaN));
      const marginal = sequential.map((t, i) => marginalStepMs(t, ours[i] ?? Number.NaN, STEPS, modelMs[i] ?? Number.NaN));
      const perStep = median(overhead);
      record({
        order: 13.1,
        workload: steps13,
        variant: `dirigent: runtime per step over the model's time: (task p50 − ${STEPS} × model round trip p50) ÷ ${STEPS}, per round`,
        unit: "ms",
        figure: figureOf(overhead),
        target: "≤ 0.5 ms",
        met: perStep <= 0.5,
      });
      record({
        order: 13.2,
        workload: steps13,
        variant: `dirigent: one step more: (task p50 − one-step task p50) ÷ ${STEPS - 1} − model round trip p50, per round`,
        unit: "ms",
        figure: figureOf(marginal),
      });
      record({
        order: 13.3,
        workload: steps13,
        variant: "dirigent: the task, submit → result, p50",
        unit: "ms",
        figure: figureOf(sequential),
      });
      record({
        order: 13.4,
        workload: steps13,
        variant: "dirigent: CPU of the `up` process per task (per step: ÷ 10)",
        unit: "µs",
        figure: figureOf(cpu.sequential),
      });
      const peerSteps = Object.fromEntries(stepPeers.map((p) => [p.key, p50[`${p.key}-steps`] ?? []]));
      recordSteps(steps13, stepPeers, STEPS, sequential, modelMs, peerSteps, stepsCpu);
    }),
    WHOLE,
  );
});
