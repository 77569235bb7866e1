#!/usr/bin/env node
/**
 * A hidden class per XState actor on Node 20 (BENCHMARKS.md, twentieth round). In this V8 (11.3), an object literal
 * that spreads another object literal and then adds properties (`{ ...defaults, ...options }`) gets, once its site
 * is warm, a hidden class (a V8 `Map` with its own descriptor array) of its own: the spread's fast path copies the
 * source's class without its transitions, so every property added after it makes a new one. `Object.assign({},
 * defaults, options)` shares one class. XState 5.33 spreads this way where it makes every actor's options (the
 * `Actor` constructor), every snapshot it clones (`cloneMachineSnapshot`, at each `assign` and each child started)
 * and every invoked actor's options (`spawnChild` in `enterStates`).
 *
 * This script shows the three things measured there, with the XState this project installs and with a copy of it
 * (in a temporary directory) whose three spreads are written as `Object.assign`:
 * 1. plain objects: whether two objects made by each form, after warm-up, share their hidden class;
 * 2. the options of 2,000 actors: how many of them have a hidden class of their own;
 * 3. the CPU per run of a machine of four states (each an `assign` and an invoked promise actor answering at once),
 *    three alternated samples of `N` runs each.
 *
 *   node --allow-natives-syntax test/bench/xstate-shapes.mjs [N=20000]
 */
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const N = Number(process.argv[2] ?? 20000);
const sameClass = new Function("a", "b", "return %HaveSameMap(a, b)");

// 1. Plain objects.
const defaults = { clock: {}, logger: () => undefined, devTools: false };
const spread = (options) => ({ ...defaults, ...options });
const assigned = (options) => Object.assign({}, defaults, options);
for (const [name, make] of [
  ["{ ...defaults, ...options }", spread],
  ["Object.assign({}, defaults, options)", assigned],
]) {
  let a;
  for (let i = 0; i < 1000; i++) a = [make({ input: i }), make({ input: i })];
  console.log(`${name}: two objects after warm-up share a hidden class: ${sameClass(a[0], a[1])}`);
}

// The installed XState, and a copy with its three spreads written as Object.assign.
const require = createRequire(import.meta.url);
const installed = dirname(require.resolve("xstate/package.json"));
const copy = mkdtempSync(join(tmpdir(), "xstate-assign-"));
cpSync(installed, copy, { recursive: true });
const EDITS = [
  [/\{\s*\.\.\.defaultOptions,\s*\.\.\.options\s*\}/, "Object.assign({}, defaultOptions, options)"],
  [
    /createMachineSnapshot\(\{\s*\.\.\.snapshot,\s*\.\.\.config\s*\}, snapshot\.machine\)/,
    "createMachineSnapshot(Object.assign({}, snapshot, config), snapshot.machine)",
  ],
  [
    /spawnChild\(invokeDef\.src, \{\s*\.\.\.invokeDef,\s*syncSnapshot: !!invokeDef\.onSnapshot\s*\}\)/,
    "spawnChild(invokeDef.src, Object.assign({}, invokeDef, { syncSnapshot: !!invokeDef.onSnapshot }))",
  ],
];
const core = readdirSync(join(copy, "dist")).find((f) => /^raise-[0-9a-f]+\.cjs\.js$/.test(f));
if (core === undefined) throw new Error(`no production build of XState's core in ${installed}/dist`);
let text = readFileSync(join(copy, "dist", core), "utf8");
for (const [pattern, replacement] of EDITS) {
  if (!pattern.test(text)) throw new Error(`XState's ${core} has changed: ${pattern} not found`);
  text = text.replace(pattern, replacement);
}
writeFileSync(join(copy, "dist", core), text);
const builds = { installed: require(installed), "Object.assign": require(copy) };

/** A machine of four states, each assigning and invoking an effect that answers at once. */
function machineOf({ assign, fromPromise, setup }) {
  const STATES = ["a", "b", "c", "d"];
  return setup({ actors: { work: fromPromise(async ({ input }) => input + 1) } }).createMachine({
    context: { n: 0 },
    initial: "a",
    states: Object.fromEntries([
      ...STATES.map((state, i) => [
        state,
        {
          entry: assign({ at: state }),
          invoke: {
            src: "work",
            input: ({ context }) => context.n,
            onDone: { target: STATES[i + 1] ?? "end", actions: assign({ n: ({ event }) => event.output }) },
          },
        },
      ]),
      ["end", { type: "final" }],
    ]),
  });
}
const machines = Object.fromEntries(Object.entries(builds).map(([name, x]) => [name, machineOf(x)]));

// 2. The options of 2,000 actors.
for (const [name, x] of Object.entries(builds)) {
  const actors = Array.from({ length: 2000 }, () => x.createActor(machines[name], { input: {} }));
  let own = 0;
  for (let i = 1; i < actors.length; i++) if (!sameClass(actors[i - 1].options, actors[i].options)) own++;
  console.log(`${name}: of 2,000 actors' options, ${own} have a hidden class other than the actor's before`);
}

// 3. CPU per run.
async function runs(name, count) {
  const x = builds[name];
  for (let i = 0; i < count; i++) await x.toPromise(x.createActor(machines[name]).start());
}
for (const name of Object.keys(builds)) await runs(name, 2000);
const cpu = Object.fromEntries(Object.keys(builds).map((name) => [name, []]));
for (let sample = 0; sample < 3; sample++)
  for (const name of sample % 2 === 0 ? Object.keys(builds) : Object.keys(builds).reverse()) {
    globalThis.gc?.();
    const before = process.cpuUsage();
    await runs(name, N);
    const used = process.cpuUsage(before);
    cpu[name].push((used.user + used.system) / N);
  }
for (const [name, samples] of Object.entries(cpu))
  console.log(`${name}: ${samples.map((s) => s.toFixed(1)).join(", ")} µs of CPU per run (four states, four effects)`);
rmSync(copy, { recursive: true, force: true });
