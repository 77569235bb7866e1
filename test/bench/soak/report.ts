/**
 * The figures of `npm run soak`, computed from what the run observed (submissions, results, model calls, kills,
 * memory samples). Pure, so that test/bench/soak/report.test.ts checks the arithmetic without a run.
 */
/** The roles the soak kills (each runs in its own `dirigent worker` process). */
export const KILLED_ROLES = ["director", "evaluator", "handler", "memory"] as const;
export type KilledRole = (typeof KILLED_ROLES)[number];

/** A `kill -9` of a role process, at a time in ms since the load began. */
export interface Kill {
  at: number;
  role: KilledRole;
}

/** A model call for a step (its marker, `soak-17-s2`), at a time in ms since the load began. */
export interface ModelCall {
  at: number;
  step: string;
}

/** A reading of one `up` process's memory at a time in ms since the load began. */
export interface MemorySample {
  at: number;
  /** Resident set size, bytes (`VmRSS` of /proc/<pid>/status). */
  rss: number;
  /** The V8 heap in use, bytes (the process's own `dirigent_nodejs_heap_size_used_bytes`), when it answered. */
  heapUsed?: number;
}

/** How the submitted tasks ended. */
export interface Tally {
  /** Submissions answered `accepted` (or `duplicate`, for a retried submission of the same task). */
  accepted: number;
  /** Submissions that got no acceptance after every retry. */
  refused: number;
  /** Accepted tasks whose result was COMPLETE. */
  completed: number;
  /** Accepted tasks whose result was anything else. */
  failed: number;
  /** Accepted tasks without a result once the run drained. */
  lost: number;
  /** Tasks with more than one stored result. */
  repeatedResults: number;
}

/** Counts the outcomes of the `accepted` tasks from their stored results (statuses by task id). */
export function tally(accepted: ReadonlySet<string>, refused: number, results: ReadonlyMap<string, readonly string[]>): Tally {
  let completed = 0;
  let failed = 0;
  let lost = 0;
  let repeatedResults = 0;
  for (const id of accepted) {
    const statuses = results.get(id) ?? [];
    if (statuses.length === 0) lost++;
    else if (statuses[0] === "COMPLETE") completed++;
    else failed++;
    if (statuses.length > 1) repeatedResults++;
  }
  return { accepted: accepted.size, refused, completed, failed, lost, repeatedResults };
}

/** Repeated model calls: every call of a step after its first, each put down to the latest kill before it. */
export interface Repeats {
  /** Calls in all. */
  calls: number;
  /** Calls of a step already called. */
  repeated: number;
  /** Repeated calls by the role of the kill before them (`none`: before the first kill). */
  byRole: Record<KilledRole | "none", number>;
}

/** Counts the repeated calls among `calls` and puts each down to the latest of `kills` at or before it. */
export function repeats(calls: readonly ModelCall[], kills: readonly Kill[]): Repeats {
  const byRole: Repeats["byRole"] = { director: 0, evaluator: 0, handler: 0, memory: 0, none: 0 };
  const sortedKills = [...kills].sort((a, b) => a.at - b.at);
  const seen = new Set<string>();
  let repeated = 0;
  for (const call of [...calls].sort((a, b) => a.at - b.at)) {
    if (!seen.has(call.step)) {
      seen.add(call.step);
      continue;
    }
    repeated++;
    const cause = sortedKills.filter((k) => k.at <= call.at).at(-1);
    byRole[cause?.role ?? "none"]++;
  }
  return { calls: calls.length, repeated, byRole };
}

/** A memory figure over a stretch of the run: the mean of its samples, and their range. */
export interface Stretch {
  mean: number;
  min: number;
  max: number;
}

/** One memory figure of an `up` process over the run. */
export interface MemoryPoints {
  /** The first sample, before the load. */
  start: number;
  /** The thirds of the time from the end of the warm-up to the end of the load: early, middle, end. */
  thirds: [Stretch, Stretch, Stretch];
  /** The larger of |middle − early| and |end − early| (means), as a fraction of early. */
  drift: number;
}

/**
 * The figure `of` each sample at the start and over the thirds of the load after its warm-up (times since the load
 * began, up to `durationMs`). A third's mean spans the saw-tooth of garbage collection (the heap grows between major
 * collections, each of which brings it back down), where a single reading would land anywhere on it. Undefined when a
 * third holds no sample.
 */
export function memoryPoints(
  samples: readonly MemorySample[],
  of: (s: MemorySample) => number | undefined,
  warmupMs: number,
  durationMs: number,
): MemoryPoints | undefined {
  const values = samples.flatMap((s) => {
    const v = of(s);
    return v === undefined ? [] : [{ at: s.at, v }];
  });
  const third = (durationMs - warmupMs) / 3;
  const stretch = (k: number): Stretch | undefined => {
    const from = warmupMs + k * third;
    const inside = values.filter((x) => x.at >= from && x.at <= from + third).map((x) => x.v);
    return inside.length === 0
      ? undefined
      : { mean: inside.reduce((a, b) => a + b, 0) / inside.length, min: Math.min(...inside), max: Math.max(...inside) };
  };
  const start = values[0]?.v;
  const [early, middle, end] = [stretch(0), stretch(1), stretch(2)];
  if (start === undefined || early === undefined || middle === undefined || end === undefined) return undefined;
  const drift = Math.max(Math.abs(middle.mean - early.mean), Math.abs(end.mean - early.mean)) / early.mean;
  return { start, thirds: [early, middle, end], drift };
}

/** The limit on {@link MemoryPoints.drift} of the RSS: flat within 10 % after the warm-up. */
export const RSS_DRIFT_LIMIT = 0.1;

/** Bytes as MiB with one decimal. */
export const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/** A signed percentage with one decimal. */
export const percent = (fraction: number): string => `${fraction >= 0 ? "+" : ""}${(fraction * 100).toFixed(1)} %`;
