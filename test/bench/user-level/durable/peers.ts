/**
 * The durable-execution peers of the user-level bench, DBOS and Restate, as the bench sees them: started (or the
 * reason they are not), the processes whose CPU is read, and their rows in workloads 11–13 beside dirigent's. Each
 * runs the same work as the other contenders: one model call per task (a DBOS step, a Restate `ctx.run`), and the
 * 10-step workflow of workload 13 (10 steps, 10 `ctx.run`s, one after the other).
 */
import { figureOf, fmt, median, postgresCpuUs, record, type Row } from "../../results.js";
import type { Sequential } from "../dirigent.js";
import { ratio, stepOverheadMs } from "../stats.js";
import { withCpu, type CpuSource } from "../processes.js";
import { POLL_MS, startDbos } from "./dbos.js";
import { startRestate } from "./restate.js";

/** One peer: its name, and either the running contender or why it is not there. */
export interface Peer {
  readonly key: "langgraph" | "dbos" | "restate";
  readonly name: string;
  /** Row orders of this peer within a block of rows (LangGraph.js 0, in workload 13 only; DBOS 1; Restate 2). */
  readonly slot: number;
  readonly contender?: Sequential;
  readonly skipped: string;
  /** The processes whose CPU is read, worker first. */
  readonly processes: ReadonlyArray<{ what: string; pid: CpuSource }>;
  /** How a task is submitted and awaited, and what it runs (throughput rows). */
  readonly how: string;
  readonly unit: string;
  /** The sequential workflow of workload 13, as this peer writes it. */
  readonly workflow: string;
}

const reason = (name: string, error: unknown) => `skipped: ${name} did not start (${String(error).slice(0, 200)})`;

/**
 * Starts DBOS (unless PostgreSQL is `postgresMissing`) and Restate, each at `concurrency` and with `steps` steps in
 * its sequential workflow. A peer that fails to start is kept with the reason, as its rows will say.
 */
export async function startPeers(modelUrl: string, concurrency: number, steps: number, postgresMissing?: string): Promise<Peer[]> {
  const dbos =
    postgresMissing === undefined
      ? await startDbos(modelUrl, concurrency, steps).catch((error: unknown) => reason("the DBOS worker", error))
      : `skipped: PostgreSQL not reachable (${postgresMissing}); set BENCH_PG_URL`;
  const restate = await startRestate(modelUrl, concurrency, steps).catch((error: unknown) => reason("Restate", error));
  const peers: Peer[] = [
    {
      key: "dbos",
      name: "DBOS",
      slot: 1,
      ...(typeof dbos === "string"
        ? { skipped: dbos, processes: [] }
        : {
            contender: dbos,
            skipped: "",
            processes: [
              { what: "the worker process", pid: dbos.pid },
              { what: "PostgreSQL (all its processes, whoever they serve)", pid: postgresCpuUs },
            ],
          }),
      how: `worker process, a queue of concurrency ${concurrency} polled every ${POLL_MS} ms; DBOSClient.enqueue → waitAll (polling every ${POLL_MS} ms); one step calls the model through the openai SDK`,
      unit: "workflows/s",
      workflow: `a workflow of ${steps} DBOS steps`,
    },
    {
      key: "restate",
      name: "Restate",
      slot: 2,
      ...(typeof restate === "string"
        ? { skipped: restate, processes: [] }
        : {
            contender: restate,
            skipped: "",
            processes: [
              { what: "the service process", pid: restate.pid },
              { what: "the Restate server", pid: restate.serverPid },
            ],
          }),
      how: `restate-server + service process; POST /bench/chat on the ingress (at most ${concurrency} at once) → answer; one ctx.run calls the model through the openai SDK`,
      unit: "invocations/s",
      workflow: `a handler of ${steps} ctx.run`,
    },
  ];
  for (const peer of peers) if (!peer.contender) console.log(`[bench] ${peer.name}: ${peer.skipped}`);
  return peers;
}

/**
 * LangGraph.js (started by the bench beside BullMQ, its rows of workloads 11 and 12 written there) as a peer of
 * workload 13: a chain of `steps` nodes, checkpointed in PostgreSQL.
 */
export function langGraphPeer(contender: Sequential | undefined, skipped: string, steps: number): Peer {
  return {
    key: "langgraph",
    name: "LangGraph.js",
    slot: 0,
    skipped,
    ...(contender
      ? {
          contender,
          processes: [
            { what: "the worker process", pid: contender.pid },
            { what: "PostgreSQL (all its processes, whoever they serve)", pid: postgresCpuUs },
          ],
        }
      : { processes: [] }),
    how: "",
    unit: "",
    workflow: `a chain of ${steps} nodes (PostgresSaver), POST /steps`,
  };
}

export async function stopPeers(peers: readonly Peer[] | undefined): Promise<void> {
  for (const peer of peers ?? []) await peer.contender?.stop();
}

/** Records `row`, or a "skipped" row in its place when `values` is absent or empty. */
export function recordOr(row: Omit<Row, "figure">, values: number[] | undefined, skipped: string): void {
  if (values && values.length) record({ ...row, figure: figureOf(values) });
  else record({ ...row, note: skipped });
}

/** Per-round ratios of two variants' values (rounds pair up: the same index is the same round). */
export const perRound = (a: number[], b: number[] | undefined): number[] =>
  (b ?? []).map((x, i) => ratio(a[i] ?? Number.NaN, x)).filter((x): x is number => x !== undefined);

/** `(2.1× DBOS, 1.3× Restate)` of the medians of `ours` and each peer's `runs`. */
export function versusPeers(ours: number, peers: readonly Peer[], runs: Record<string, number[] | undefined>): string[] {
  return peers.flatMap((p) => {
    const theirs = runs[p.key];
    return theirs && theirs.length ? [`${fmt(ours / median(theirs))}× ${p.name}`] : [];
  });
}

/** Rows 11.31/11.32 (throughput), 11.51/11.52 (dirigent ÷ peer, target ≥ 2×) and 11.65–11.67 (CPU per task). */
export function recordThroughput(
  workload: string,
  peers: readonly Peer[],
  ours: number[],
  runs: Record<string, number[] | undefined>,
  cpu: Record<string, number[][]>,
): void {
  for (const p of peers) {
    const theirs = p.contender ? runs[p.key] : undefined;
    recordOr({ order: 11.3 + p.slot / 100, workload, variant: `${p.name}: ${p.how}`, unit: p.unit }, theirs, p.skipped);
    const toPeer = ratio(median(ours), theirs && median(theirs));
    recordOr(
      {
        order: 11.5 + p.slot / 100,
        workload,
        variant: `dirigent ÷ ${p.name}, per round`,
        unit: "×",
        target: "≥ 2× (issue 34, medians)",
        ...(toPeer === undefined ? {} : { met: toPeer >= 2 }),
      },
      theirs && perRound(ours, theirs),
      p.skipped,
    );
  }
  cpuRows(11.65, workload, peers, cpu, "per task");
}

/** Rows `base` + 0.00n: the CPU of each peer's processes per task, from `cpu[key][i]` (the i-th process). */
function cpuRows(base: number, workload: string, peers: readonly Peer[], cpu: Record<string, number[][]>, per: string): void {
  let n = 0;
  for (const p of peers) {
    const processes = p.contender ? p.processes : [{ what: p.key === "dbos" ? "the worker process" : "the service process", pid: 0 }];
    processes.forEach(({ what }, i) => {
      recordOr(
        { order: base + n++ / 1000, workload, variant: `${p.name}: CPU of ${what} ${per}`, unit: "µs" },
        p.contender ? cpu[p.key]?.[i] : undefined,
        p.skipped,
      );
    });
  }
}

/** Rows 12.32–12.35 (p50, p99), 12.51/12.52 (dirigent ÷ peer p50) and 12.73– (CPU per task one at a time). */
export function recordLatency(
  workload: string,
  peers: readonly Peer[],
  ours: number[],
  p50: Record<string, number[]>,
  p99: Record<string, number[]>,
  cpu: Record<string, number[][]>,
): void {
  for (const p of peers) {
    const submit = p.key === "dbos" ? "enqueue → getResult (polling every " + POLL_MS + " ms)" : "POST /bench/chat → answer";
    const theirs = p.contender ? p50[p.key] : undefined;
    const order = 12.3 + p.slot / 50;
    recordOr({ order, workload, variant: `${p.name}: ${submit}, p50`, unit: "ms" }, theirs, p.skipped);
    recordOr(
      { order: order + 0.01, workload, variant: `${p.name}: ${submit}, p99`, unit: "ms" },
      p.contender ? p99[p.key] : undefined,
      p.skipped,
    );
    recordOr(
      { order: 12.5 + p.slot / 100, workload, variant: `dirigent ÷ ${p.name} p50, per round`, unit: "×" },
      theirs && perRound(ours, theirs),
      p.skipped,
    );
  }
  cpuRows(12.73, workload, peers, cpu, "per task, one at a time");
}

/**
 * Rows 13.5– of the 10-step workflow: each peer's p50 and runtime per step over the model's round trip (as row
 * 13.1 computes dirigent's), dirigent's per step ÷ the peer's (target against Restate: ≤ 0.5×), and the CPU of its
 * processes per workflow.
 */
export function recordSteps(
  workload: string,
  peers: readonly Peer[],
  steps: number,
  ours: number[],
  modelMs: number[],
  sequential: Record<string, number[]>,
  cpu: Record<string, number[][]>,
): void {
  const oursPerStep = ours.map((t, i) => stepOverheadMs(t, steps, modelMs[i] ?? Number.NaN));
  for (const p of peers) {
    const base = 13.5 + p.slot / 10;
    const theirs = p.contender ? sequential[p.key] : undefined;
    const perStep = theirs?.map((t, i) => stepOverheadMs(t, steps, modelMs[i] ?? Number.NaN));
    recordOr({ order: base, workload, variant: `${p.name}: ${p.workflow}, submit → result, p50`, unit: "ms" }, theirs, p.skipped);
    recordOr(
      { order: base + 0.01, workload, variant: `${p.name}: runtime per step over the model's time (as row 13.1), per round`, unit: "ms" },
      perStep,
      p.skipped,
    );
    const toPeer = ratio(median(oursPerStep), perStep && median(perStep));
    recordOr(
      {
        order: base + 0.02,
        workload,
        variant: `dirigent's runtime per step ÷ ${p.name}'s, per round`,
        unit: "×",
        ...(p.key === "restate" ? { target: "≤ 0.5× (issue 34, medians)", ...(toPeer === undefined ? {} : { met: toPeer <= 0.5 }) } : {}),
      },
      perStep && perRound(oursPerStep, perStep),
      p.skipped,
    );
    (p.contender ? p.processes : [{ what: "its process", pid: 0 }]).forEach(({ what }, i) =>
      recordOr(
        { order: base + 0.03 + i / 1000, workload, variant: `${p.name}: CPU of ${what} per workflow`, unit: "µs" },
        p.contender ? cpu[p.key]?.[i] : undefined,
        p.skipped,
      ),
    );
  }
}

/** Adds to `variants` each running peer's `measure`, with the CPU of its processes per task into `cpu[key][i]`. */
export function addPeers(
  peers: readonly Peer[] | undefined,
  variants: Record<string, () => Promise<number>>,
  key: (p: Peer) => string,
  tasks: number,
  measure: (c: NonNullable<Peer["contender"]>, key: string) => () => Promise<number>,
  cpu: Record<string, number[][]>,
): void {
  for (const p of peers ?? []) {
    if (!p.contender) continue;
    const lists = p.processes.map(() => [] as number[]);
    cpu[p.key] = lists;
    variants[key(p)] = withCpu(
      tasks,
      measure(p.contender, key(p)),
      p.processes.map(({ pid }, i) => ({ pid, list: lists[i]! })),
    );
  }
}
