/**
 * Named logic in the machines: every event a machine reacts to follows one convention (lowercase dotted words, like
 * `task.start` or `subgoal.settled`; XState's own `xstate.*` events aside), and no guard or action is drawn as
 * `inline` in the charts (runtime/charts/graph.ts names an inline function `inline`): each is named in `setup()`, so
 * the drawn chart says what it checks or does. Machines already free of bare `assign`s stay so.
 */
import { describe, expect, it } from "vitest";
import { machineGraph } from "../../runtime/charts/graph.js";
import { machines } from "../../runtime/charts/registry.js";

/** Lowercase words joined by dots; a word may hold digits and underscores after its first letter. */
const CONVENTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
/** The graph's labels for events that are not a machine's own: eventless, invoke results, delays, a state's done. */
const BUILT_IN = /^(always|done|done:.+|error:.+|after:.+|xstate\..+)$/;
/** Machines whose every action is named: a bare `assign` in their chart is a regression. */
const NAMED_ASSIGNS = new Set([
  "evaluation",
  "sequential",
  "reduce",
  "director-evaluator",
  "continuation",
  "checkmate",
  "memory",
  "goal",
  "supervisor",
]);

const graphs = machines.map(({ name, machine }) => ({ name, graph: machineGraph(machine) }));

describe("named logic in the machines (runtime/charts/registry.ts)", () => {
  it("names every event after the convention: lowercase dotted words", () => {
    const wrong = graphs.flatMap(({ name, graph }) =>
      [...new Set(graph.transitions.map((t) => t.event))]
        .filter((e) => !BUILT_IN.test(e) && !CONVENTION.test(e))
        .map((e) => `${name}: ${e}`),
    );
    expect(wrong).toEqual([]);
  });

  it("finds the goal and supervisor events under their lowercase names", () => {
    const events = (name: string) => new Set(graphs.find((g) => g.name === name)?.graph.transitions.map((t) => t.event));
    expect([...events("goal")]).toEqual(expect.arrayContaining(["stop", "subgoal.settled"]));
    expect([...events("supervisor")]).toEqual(expect.arrayContaining(["loop.halted", "goal.stop", "drain", "reconcile"]));
  });

  it("draws no guard or action as inline", () => {
    const inline = graphs.flatMap(({ name, graph }) => [
      ...graph.transitions.flatMap((t) => [
        ...(t.guard?.includes("inline") ? [`${name}: guard of ${t.source} on ${t.event}`] : []),
        ...t.actions.filter((a) => a === "inline").map(() => `${name}: action of ${t.source} on ${t.event}`),
      ]),
      ...graph.states.flatMap((s) => [...s.entry, ...s.exit].filter((a) => a === "inline").map(() => `${name}: entry/exit of ${s.id}`)),
    ]);
    expect(inline).toEqual([]);
  });

  it("draws no bare assign in the machines whose actions are all named", () => {
    const bare = graphs
      .filter(({ name }) => NAMED_ASSIGNS.has(name))
      .flatMap(({ name, graph }) => [
        ...graph.transitions.filter((t) => t.actions.includes("assign")).map((t) => `${name}: ${t.source} on ${t.event}`),
        ...graph.states.filter((s) => [...s.entry, ...s.exit].includes("assign")).map((s) => `${name}: entry/exit of ${s.id}`),
      ]);
    expect(bare).toEqual([]);
  });
});
