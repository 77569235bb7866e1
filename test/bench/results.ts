/**
 * Figures of `npm run bench`: each bench file records its rows here (one JSON file per row in the directory the
 * global setup names in `DIRIGENT_BENCH_RESULTS`); the global teardown turns them into the table printed and
 * written to BENCHMARKS.md. Also the statistics every workload uses: medians with min–max over repeats.
 */
import { randomBytes } from "node:crypto";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";

/** The environment variable naming the results directory of this run. */
export const RESULTS_ENV = "DIRIGENT_BENCH_RESULTS";

/** One measured figure: the median over repeats, with its spread. */
export interface Figure {
  median: number;
  min: number;
  max: number;
  /** Repeats measured (after warm-up). */
  runs: number;
}

/** One row of the table. */
export interface Row {
  /** Sort key: workload number, then the order within it. */
  order: number;
  workload: string;
  /** What is measured, e.g. `dirigent, full durable pipeline`. */
  variant: string;
  /** Unit, e.g. `tasks/s`, `ms`, `µs`. */
  unit: string;
  /** The figure; absent when the row only points elsewhere (`note`). */
  figure?: Figure;
  /** The target, as text: `≥ 1.0× BullMQ`, `≤ 1 ms`. */
  target?: string;
  /** Whether the target is met; undefined when there is none or it cannot be judged. */
  met?: boolean;
  /** Free text: a ratio, a reason, a pointer. */
  note?: string;
}

/** The median (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The p-th percentile (nearest rank) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((s.length * p) / 100) - 1))] as number;
}

/** Median with min–max of per-repeat values. */
export function figureOf(values: readonly number[]): Figure {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), runs: values.length };
}

/**
 * Runs the variants `repeats` times, alternating their order each round (A B, B A, …) so drift of a shared machine
 * hits all alike, after one unrecorded warm-up round. Returns each variant's per-repeat values.
 */
export async function alternate<K extends string>(
  variants: Record<K, () => Promise<number>>,
  repeats: number,
): Promise<Record<K, number[]>> {
  const names = Object.keys(variants) as K[];
  const out = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  for (const name of names) await variants[name]();
  for (let round = 0; round < repeats; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) out[name].push(await variants[name]());
  }
  return out;
}

/**
 * A bench body that measures on its first call only: tinybench may call a `bench` function more than once even
 * with `iterations: 1`, and each workload here does its own warm-up and repeats.
 */
export function once(body: () => void | Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= Promise.resolve().then(body));
}

/** Options of a `bench` whose body is a whole workload, run {@link once}. */
export const WHOLE = { iterations: 1, time: 0, warmupIterations: 0, warmupTime: 0 } as const;

/** Records a row for the table (a no-op outside `npm run bench`, e.g. `vitest bench` on one file). */
export function record(row: Row): void {
  const dir = process.env[RESULTS_ENV];
  const line = row.figure ? `${fmt(row.figure.median)} ${row.unit} (${fmt(row.figure.min)}–${fmt(row.figure.max)})` : (row.note ?? "");
  console.log(`[bench] ${row.workload} — ${row.variant}: ${line}${row.target ? ` target ${row.target}` : ""}`);
  if (dir === undefined) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${row.order.toFixed(3)}-${randomBytes(3).toString("hex")}.json`), JSON.stringify(row));
}

/** All rows recorded in `dir`, in table order. */
export function readRows(dir: string): Row[] {
  let files: string[] = [];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith(".json"));
  } catch {
    return [];
  }
  return files.map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as Row).sort((a, b) => a.order - b.order);
}

/** A number with sensible precision for the table. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const a = Math.abs(n);
  if (a >= 100) return n.toFixed(0);
  if (a >= 10) return n.toFixed(1);
  if (a >= 1) return n.toFixed(2);
  return n.toFixed(3);
}

function version(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", timeout: 5000 }).trim().split("\n")[0] ?? "?";
  } catch {
    return "not installed";
  }
}

/** One line about the machine: cores, memory, Node, nats-server and Redis versions. */
export function machineLine(): string {
  const cpu = cpus();
  const redis = version("redis-server", ["--version"]).match(/v=(\S+)/)?.[1] ?? "not installed";
  return `${cpu.length} × ${cpu[0]?.model.trim() ?? "?"}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${version("nats-server", ["--version"])}, Redis ${redis}`;
}

/** The Markdown table of `rows`. */
export function table(rows: readonly Row[]): string {
  const lines = ["| # | workload | variant | median (min–max) | runs | target | met |", "| --- | --- | --- | --- | --- | --- | --- |"];
  for (const r of rows) {
    const value = r.figure ? `${fmt(r.figure.median)} ${r.unit} (${fmt(r.figure.min)}–${fmt(r.figure.max)})` : "—";
    const met = r.met === undefined ? "" : r.met ? "yes" : "**no**";
    const note = r.note ? ` ${r.note}` : "";
    lines.push(
      `| ${Math.floor(r.order)} | ${r.workload} | ${r.variant}${r.figure ? note : ""} | ${r.figure ? value : (r.note ?? "—")} | ${r.figure?.runs ?? ""} | ${r.target ?? ""} | ${met} |`,
    );
  }
  return lines.join("\n");
}

const CLOCK_TICKS_PER_S = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/**
 * The CPU a process has used so far, µs (user + system, all its threads; from /proc/<pid>/stat, in clock ticks of
 * usually 10 ms): for a server's share of a run. `undefined` where /proc has no such process.
 */
export function processCpuUs(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    // Fields 14 and 15 of the line (utime, stime) are 11 and 12 after the command name.
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** The resident set size of process `pid` in bytes (`VmRSS`), or undefined once it is gone. */
export function rssOf(pid: number): number | undefined {
  try {
    const kb = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * The CPU the machine's PostgreSQL has used so far, µs: the user + system time of every `postgres` process (the
 * postmaster, its helpers and one backend per connection) and, through the postmaster's children's times, that of
 * the backends that have exited. Every client of the cluster counts, not only the bench's. `undefined` where /proc
 * shows no PostgreSQL.
 */
export function postgresCpuUs(): number | undefined {
  const processes = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .flatMap((pid) => {
      try {
        const line = readFileSync(`/proc/${pid}/stat`, "utf8");
        if (!line.includes(" (postgres) ")) return [];
        const fields = line.split(") ")[1]?.split(" ") ?? [];
        // After the command name: ppid is field 1, utime..cstime are 11..14.
        const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
        return [{ pid: Number(pid), ppid: Number(fields[1]), own: utime! + stime!, children: cutime! + cstime! }];
      } catch {
        return []; // exited meanwhile
      }
    });
  if (processes.length === 0) return undefined;
  const pids = new Set(processes.map((p) => p.pid));
  const ticks = processes.reduce((sum, p) => sum + p.own + (pids.has(p.ppid) ? 0 : p.children), 0);
  return (ticks * 1e6) / CLOCK_TICKS_PER_S;
}
