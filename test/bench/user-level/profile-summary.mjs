#!/usr/bin/env node
/**
 * Where a process's CPU went, from the `.cpuprofile` files `node --cpu-prof` wrote (records-cost.mjs `--prof DIR`,
 * or `BENCH_CPU_PROF=DIR`): each sample's time goes to the package or the folder of dirigent that owns the innermost
 * frame that is not Node's own code, so the time of `JSON.parse` called by nats.js counts as nats.js, and the time
 * of a socket write as whoever wrote. Garbage collection, the idle loop and the program's own samples are their own
 * rows. Prints one table per profile, or with `--merge` one for all of them, in percent of the busy time (idle
 * excluded) and in µs per task when `--tasks N` says how many tasks the profiles span. `--leave-out REGEX` leaves
 * the rows whose owner matches out of the busy time (`'^node: modules/'`: the process's start, Node's module
 * loader); `--functions TEXT` lists the costliest functions of the owners that contain TEXT.
 *
 * `--windows FILE` splits one profile's samples (or, given no profile, the time alone) at the marks in FILE
 * (`[[µs, kind], …]` on the profile's clock, as ./count-writes.cjs writes them: records-cost.mjs `--writes 1` with
 * `--prof DIR`, beside the profile, or `--marks DIR`), and prints each kind of window (from one mark's kind to the
 * next's: `_INBOX.<reply> → R.tasks.<id>.events + …`) with how often it came, its median length, and the CPU spent in
 * it and by whom, per window (means; the first 10 of each kind left out, as they carry one-time costs). Run one task
 * at a time (`--throughput 0`), a task's windows follow each other: what the process did between two of its writes,
 * on the task's critical path. Sampled every millisecond by default, a profile tells more of short windows with
 * `NODE_ARGS_<variant>=--cpu-prof-interval=100` (which slows the process more).
 *
 *   node test/bench/user-level/profile-summary.mjs /tmp/prof/head-1 [--merge] [--tasks 1000] [--top 12] [--leave-out RE]
 *   node test/bench/user-level/records-cost.mjs --variants head=. --throughput 0 --seq 0 --writes 1 --prof /tmp/prof
 *   node test/bench/user-level/profile-summary.mjs /tmp/prof/head-0 --windows /tmp/prof/head-0/marks.json
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    merge: { type: "boolean" },
    tasks: { type: "string" },
    top: { type: "string" },
    functions: { type: "string" },
    "leave-out": { type: "string" },
    windows: { type: "string" },
  },
});
const top = Number(args.top ?? 14);
const tasks = args.tasks === undefined ? undefined : Number(args.tasks);
const leaveOut = args["leave-out"] === undefined ? undefined : new RegExp(args["leave-out"]);

function profiles(path) {
  if (statSync(path).isFile()) return [path];
  return readdirSync(path, { recursive: true })
    .filter((f) => String(f).endsWith(".cpuprofile"))
    .map((f) => join(path, String(f)));
}

/** The owner of a frame: a package, a folder of dirigent, Node's own code, or a special row. */
function owner(frame) {
  const { url, functionName } = frame;
  if (functionName === "(garbage collector)") return "(garbage collector)";
  if (functionName === "(idle)") return "(idle)";
  if (functionName === "(program)") return "(program)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const own = /\/dist\/(protocol|machines|actors|runtime)\/([^/]+)/.exec(url);
  if (own) return own[2].endsWith(".js") ? `dirigent ${own[1]}/` : `dirigent ${own[1]}/${own[2]}/`;
  // Node's own code, and the bench's counting hooks wrapped around Node's (./count-writes.cjs): the caller's.
  if (url.startsWith("node:") || url === "" || /\/count-(writes|actors)\.cjs$/.test(url)) return undefined;
  return url;
}

/** `--windows`: the marks, in time order. */
const marks = args.windows === undefined ? undefined : JSON.parse(readFileSync(args.windows, "utf8")).sort((a, b) => a[0] - b[0]);
const windowKind = (i) => `${marks[i][1]} → ${marks[i + 1][1]}`;
/** The first windows of each kind whose CPU is left out: they carry one-time costs (module loads, compiles). */
const WARM_WINDOWS = 10;
/** Of each window (by the index of the mark that opens it), how many of its kind came before it. */
const ordinals = [];
if (marks !== undefined) {
  const seen = new Map();
  for (let i = 0; i + 1 < marks.length; i++) {
    const kind = windowKind(i);
    ordinals.push(seen.get(kind) ?? 0);
    seen.set(kind, (seen.get(kind) ?? 0) + 1);
  }
}

function summarize(files) {
  const rows = new Map();
  const fns = new Map();
  /** With `--windows`: CPU by owner in each kind of window (time between two marks), by window kind. */
  const windows = new Map();
  let total = 0;
  for (const file of files) {
    const profile = JSON.parse(readFileSync(file, "utf8"));
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map();
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    // The owner of a node: its own, or its nearest caller's when the frame is Node's own (or a native); Node's own
    // code that nothing of the process called (socket reads, timers, microtasks run by the event loop) is named by
    // the Node module of its innermost frame that has one.
    const ownerOf = new Map();
    const resolve = (id, innermost) => {
      if (ownerOf.has(id)) return ownerOf.get(id);
      const frame = byId.get(id).callFrame;
      const module = innermost ?? (frame.url.startsWith("node:") ? frame.url : undefined);
      let found = owner(frame);
      if (found === undefined) {
        const up = parent.get(id);
        found = up === undefined ? `node: ${(module ?? "(native)").replace(/^node:(internal\/)?/, "")}` : resolve(up, module);
      }
      if (innermost === undefined) ownerOf.set(id, found);
      return found;
    };
    const { samples, timeDeltas } = profile;
    let at = profile.startTime;
    let mark = 0;
    for (let i = 0; i < samples.length; i++) {
      const dt = timeDeltas[i] ?? 0;
      at += dt;
      const who = resolve(samples[i]);
      if (marks !== undefined && who !== "(idle)") {
        while (mark < marks.length && marks[mark][0] <= at) mark++;
        if (mark > 0 && mark < marks.length && ordinals[mark - 1] >= WARM_WINDOWS) {
          const kind = windowKind(mark - 1);
          const owners = windows.get(kind) ?? new Map();
          owners.set(who, (owners.get(who) ?? 0) + dt);
          windows.set(kind, owners);
        }
      }
      if (leaveOut?.test(who)) continue;
      rows.set(who, (rows.get(who) ?? 0) + dt);
      if (who !== "(idle)") total += dt;
      if (args.functions !== undefined && who.includes(args.functions)) {
        const frame = byId.get(samples[i]).callFrame;
        const key = `${frame.functionName || "(anonymous)"} ${frame.url.replace(/.*\/(dist|node_modules)\//, "")}:${frame.lineNumber + 1}`;
        fns.set(key, (fns.get(key) ?? 0) + dt);
      }
    }
  }
  return { rows, fns, total, windows };
}

/**
 * `--windows`: each kind of window, most time first (CPU with a profile, else length): how often it came, its median
 * length, and with a profile the CPU spent in it and its owners, per window.
 */
function printWindows(windows) {
  const spans = new Map();
  for (let i = 0; i + 1 < marks.length; i++) {
    const kind = windowKind(i);
    spans.set(kind, [...(spans.get(kind) ?? []), marks[i + 1][0] - marks[i][0]]);
  }
  const median = (times) => [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)] ?? 0;
  const busy = (kind) => [...(windows.get(kind)?.values() ?? [])].reduce((a, b) => a + b, 0);
  const weight = (kind) => (windows.size > 0 ? busy(kind) : median(spans.get(kind)) * spans.get(kind).length);
  const cpu = windows.size > 0;
  console.log(
    `\n| window (from one mark to the next) | times | median length µs |${cpu ? " CPU per window µs | by owner, µs per window |" : ""}`,
  );
  console.log(`| --- | --- | --- |${cpu ? " --- | --- |" : ""}`);
  for (const kind of [...spans.keys()].sort((a, b) => weight(b) - weight(a)).slice(0, top)) {
    const times = spans.get(kind);
    const row = `| ${kind} | ${times.length} | ${median(times).toFixed(0)} |`;
    if (!cpu) {
      console.log(row);
      continue;
    }
    // Means over the windows after the first WARM_WINDOWS of the kind.
    const counted = Math.max(1, times.length - WARM_WINDOWS);
    const byOwner = [...(windows.get(kind) ?? [])]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([who, t]) => `${who} ${(t / counted).toFixed(0)}`)
      .join(", ");
    console.log(`${row} ${(busy(kind) / counted).toFixed(0)} | ${byOwner} |`);
  }
}

function print(title, { rows, fns, total, windows }) {
  console.log(`\n${title}: busy ${(total / 1000).toFixed(0)} ms${tasks ? `, ${(total / tasks).toFixed(0)} µs per task` : ""}`);
  const sorted = [...rows].filter(([who]) => who !== "(idle)").sort((a, b) => b[1] - a[1]);
  const shown = sorted.slice(0, top);
  const rest = sorted.slice(top).reduce((sum, [, t]) => sum + t, 0);
  console.log(`| owner | share of busy CPU |${tasks ? " µs per task |" : ""}`);
  console.log(`| --- | --- |${tasks ? " --- |" : ""}`);
  for (const [who, t] of [...shown, ...(rest > 0 ? [["(the rest)", rest]] : [])]) {
    console.log(`| ${who} | ${((100 * t) / total).toFixed(1)} % |${tasks ? ` ${(t / tasks).toFixed(0)} |` : ""}`);
  }
  if (fns.size > 0) {
    console.log(`\nfunctions of ${args.functions}:`);
    for (const [fn, t] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${((100 * t) / total).toFixed(1)} %  ${fn}`);
  }
  if (windows.size > 0) printWindows(windows);
}

const files = positionals.flatMap(profiles);
if (files.length === 0 && marks !== undefined) printWindows(new Map());
else if (files.length === 0) throw new Error("no .cpuprofile found in the paths given");
else if (args.merge) print(`${files.length} profiles`, summarize(files));
else for (const file of files) print(file, summarize([file]));
