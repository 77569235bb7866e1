import { describe, expect, it } from "vitest";
import { createActor, fromPromise, SimulatedClock } from "xstate";
import { supervisorMachine, type SupervisorInput } from "../../../machines/supervisor/supervisor.js";

/** A supervisor on a simulated clock; `active` is what each listing returns. */
function start(input: SupervisorInput, active: () => string[]) {
  const clock = new SimulatedClock();
  const started: { goalId: string; at: number }[] = [];
  const stopped: { goalId: string; reason: string }[] = [];
  let listings = 0;
  const machine = supervisorMachine.provide({
    actions: {
      startLoop: (_, p) => void started.push({ goalId: p.goalId, at: clock.now() }),
      stopLoop: (_, p) => void stopped.push(p),
    },
    actors: { listActive: fromPromise(async () => (listings++, active())) },
  });
  const actor = createActor(machine, { input, clock });
  actor.start();
  const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
  const advance = async (ms: number) => {
    clock.increment(ms);
    await settle();
  };
  return { actor, clock, started, stopped, settle, advance, listings: () => listings };
}

describe("supervisor machine", () => {
  it("starts at most the cap, a stagger apart, and the rest once loops have halted", async () => {
    const s = start({ maxConcurrent: 2, staggerMs: 2_000, tickMs: 10_000 }, () => ["a", "b", "c"]);
    await s.settle();
    expect(s.started).toEqual([{ goalId: "a", at: 0 }]);
    await s.advance(2_000);
    expect(s.started.map((x) => [x.goalId, x.at])).toEqual([
      ["a", 0],
      ["b", 2_000],
    ]);
    await s.advance(2_000);
    expect(s.started).toHaveLength(2); // at the cap: c waits
    s.actor.send({ type: "loop.halted", goalId: "a" });
    await s.settle();
    expect(s.started.map((x) => x.goalId)).toEqual(["a", "b", "c"]);
  });

  it("reconciles on each tick: new active goals start, loops of goals no longer active stop", async () => {
    let active = ["a"];
    const s = start({ maxConcurrent: 5, staggerMs: 100, tickMs: 1_000 }, () => active);
    await s.settle();
    expect(s.started.map((x) => x.goalId)).toEqual(["a"]);
    active = ["b"];
    await s.advance(1_000);
    expect(s.listings()).toBe(2);
    expect(s.stopped).toEqual([{ goalId: "a", reason: "the goal is no longer active" }]);
    expect(s.started.map((x) => x.goalId)).toEqual(["a", "b"]);
  });

  it("counts a stopping loop until it has halted and never starts its goal twice meanwhile", async () => {
    let active = ["a"];
    const s = start({ maxConcurrent: 1, staggerMs: 10, tickMs: 1_000 }, () => active);
    await s.settle();
    s.actor.send({ type: "goal.stop", goalId: "a", reason: "paused by an operator" });
    expect(s.stopped).toEqual([{ goalId: "a", reason: "paused by an operator" }]);
    active = ["a", "b"];
    await s.advance(1_000);
    await s.advance(1_000);
    // "a" is still stopping: it holds the only place, and is not restarted.
    expect(s.started.map((x) => x.goalId)).toEqual(["a"]);
    s.actor.send({ type: "loop.halted", goalId: "a" });
    await s.settle();
    await s.advance(1_000);
    expect(s.started.map((x) => x.goalId)).toEqual(["a", "b"]);
  });

  it("drains: stops every loop, starts nothing more, and ends once all have halted", async () => {
    const s = start({ maxConcurrent: 5, staggerMs: 10, tickMs: 1_000 }, () => ["a", "b", "c"]);
    await s.settle();
    await s.advance(10);
    s.actor.send({ type: "drain" });
    expect(s.stopped.map((x) => x.goalId)).toEqual(["a", "b"]);
    await s.advance(1_000);
    expect(s.started.map((x) => x.goalId)).toEqual(["a", "b"]);
    s.actor.send({ type: "loop.halted", goalId: "a" });
    expect(s.actor.getSnapshot().status).toBe("active");
    s.actor.send({ type: "loop.halted", goalId: "b" });
    expect(s.actor.getSnapshot().status).toBe("done");
  });
});
