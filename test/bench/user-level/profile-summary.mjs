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
 *   node test/bench/user-level/profile-summary.mjs /tmp/prof/head-1 [--merge] [--tasks 1000] [--top 12] [--leave-out RE]
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
  if (url.startsWith("node:") || url === "") return undefined;
  return url;
}

function summarize(files) {
  const rows = new Map();
  const fns = new Map();
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
    for (let i = 0; i < samples.length; i++) {
      const dt = timeDeltas[i] ?? 0;
      const who = resolve(samples[i]);
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
  return { rows, fns, total };
}

function print(title, { rows, fns, total }) {
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
}

const files = positionals.flatMap(profiles);
if (files.length === 0) throw new Error("no .cpuprofile found in the paths given");
if (args.merge) print(`${files.length} profiles`, summarize(files));
else for (const file of files) print(file, summarize([file]));
