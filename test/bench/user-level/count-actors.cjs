/**
 * Counts the XState actors a process starts, by kind: preloaded into `dirigent up` by records-cost.mjs `--actors 1`
 * (`node --require …/count-actors.cjs`). Each actor is counted once, when it first starts, as `root <machine id>`
 * (an actor with no parent: the root of its own actor system), `child <machine id>`, or `child <src>` for an invoked
 * actor that is not a machine (a promise or callback actor, named by its `src`). On SIGUSR2 the counts so far are
 * written as JSON to the file `DIRIGENT_COUNT_ACTORS` names: `{ "dump": n, "counts": { kind: count } }`, `n` counting
 * the dumps, so a reader knows its own.
 */
"use strict";
const { writeFileSync } = require("node:fs");
const { dirname } = require("node:path");

const file = process.env.DIRIGENT_COUNT_ACTORS;
// The xstate the process's entry point loads (a variant of records-cost.mjs has node_modules of its own).
const xstate = require(require.resolve("xstate", { paths: [dirname(process.argv[1] ?? process.cwd())] }));
const counts = new Map();
const started = new WeakSet();
const start = xstate.Actor.prototype.start;
xstate.Actor.prototype.start = function countedStart() {
  if (!started.has(this)) {
    started.add(this);
    const id = this.logic?.config?.id;
    const kind = `${this._parent ? "child" : "root"} ${id ?? (typeof this.src === "string" ? this.src : "(inline)")}`;
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return start.call(this);
};
let dumps = 0;
process.on("SIGUSR2", () => {
  if (file) writeFileSync(file, JSON.stringify({ dump: ++dumps, counts: Object.fromEntries(counts) }));
});
