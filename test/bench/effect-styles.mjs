#!/usr/bin/env node
/**
 * What an effect costs as an invoked promise actor and as an entry action answered by an event, with the XState this
 * project installs (BENCHMARKS.md, nineteenth round): a machine of four states, each waiting on an effect that answers
 * at once, run to its end `N` times (after 2,000 runs of warm-up), three alternated samples of each style. Prints wall
 * time and CPU per run (four effects).
 *
 *   node --expose-gc test/bench/effect-styles.mjs [N=20000]
 */
import { assign, createActor, fromPromise, setup } from "xstate";

const STATES = ["a", "b", "c", "d"];
const done = assign({ n: ({ event }) => event.output });

/** Each state invokes the effect and goes on when it is done. */
const invoked = setup({ actors: { work: fromPromise(async ({ input }) => input + 1) } }).createMachine({
  context: { n: 0 },
  initial: "a",
  states: Object.fromEntries([
    ...STATES.map((state, i) => [
      state,
      { invoke: { src: "work", input: ({ context }) => context.n, onDone: { target: STATES[i + 1] ?? "end", actions: done } } },
    ]),
    ["end", { type: "final" }],
  ]),
});

/**
 * Each state starts the effect in its entry action; the effect answers with an event. It makes the `AbortController`
 * an effect needs to be stopped (a promise actor makes one), which its state's exit would abort.
 */
const acted = setup({
  actions: {
    work: ({ context, self }) => {
      const stop = new AbortController();
      void Promise.resolve(context.n + 1).then((output) => stop.signal.aborted || self.send({ type: "work.done", output }));
    },
  },
}).createMachine({
  context: { n: 0 },
  initial: "a",
  states: Object.fromEntries([
    ...STATES.map((state, i) => [state, { entry: "work", on: { "work.done": { target: STATES[i + 1] ?? "end", actions: done } } }]),
    ["end", { type: "final" }],
  ]),
});

const run = (machine) =>
  new Promise((resolve) => {
    const actor = createActor(machine);
    actor.subscribe({ complete: resolve });
    actor.start();
  });

async function sample(name, machine, n) {
  global.gc?.();
  const cpu = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await run(machine);
  const wall = Number(process.hrtime.bigint() - t0) / 1e3 / n;
  const used = process.cpuUsage(cpu);
  console.log(`${name}: ${wall.toFixed(1)} µs per run, CPU ${((used.user + used.system) / n).toFixed(1)} µs (four effects)`);
}

const n = Number(process.argv[2] ?? 20_000);
for (const machine of [invoked, acted]) for (let i = 0; i < 2000; i++) await run(machine);
for (let round = 0; round < 3; round++) {
  await sample("invoked promise actors", invoked, n);
  await sample("entry actions + events", acted, n);
}
