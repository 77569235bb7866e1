/** The fork's plan (machines/fork/plan.ts): which nodes a fork replays, pure over the original's records. */
import { describe, expect, it } from "vitest";
import { changedInputs, mentionsAny, planFork, type ForkNode } from "../../../machines/fork/plan.js";
import { tid } from "../../support/ids.js";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const node = (path: string, start: number, end: number, extra: Partial<ForkNode> = {}): ForkNode => ({
  path,
  occurrence: 1,
  state: "completed",
  startedAt: at(start),
  endedAt: at(end),
  changed: false,
  cut: false,
  ...extra,
});

/** A sequential `0` of three steps, the second a sequential of two. */
const SEQUENTIAL = [
  node("0", 0, 30),
  node("0.steps.0", 1, 9),
  node("0.steps.1", 10, 19),
  node("0.steps.1.steps.0", 11, 14),
  node("0.steps.1.steps.1", 15, 18),
  node("0.steps.2", 20, 29),
];

describe("planFork", () => {
  it("replays the nodes that ended before the fork point, neither it nor its ancestors", () => {
    const plan = planFork(SEQUENTIAL, "0.steps.2", tid("t1"));
    expect(plan).toEqual({
      ok: true,
      from: { path: "0.steps.2", occurrence: 1 },
      nodes: [
        { path: "0.steps.0", occurrence: 1 },
        {
          path: "0.steps.1",
          occurrence: 1,
          nested: [
            { path: "0.steps.1.steps.0", occurrence: 1 },
            { path: "0.steps.1.steps.1", occurrence: 1 },
          ],
        },
      ],
      replayed: 4,
    });
  });

  it("of a fork, replays a node the fork replayed with the nodes within it (copied at one instant, after them)", () => {
    // The fork's own records: the map and its branches replayed at second 5 (zero duration), step 2 run live after.
    const fork = [
      node("0", 4, 9),
      node("0.steps.0", 5, 5),
      node("0.steps.0/map:0:0.steps.0.steps.0", 5, 5),
      node("0.steps.0/map:1:0.steps.0.steps.0", 5, 5),
      node("0.steps.1", 5, 8),
    ];
    expect(planFork(fork, "0.steps.1", tid("t-fork"))).toMatchObject({
      ok: true,
      nodes: [
        {
          path: "0.steps.0",
          nested: [
            { path: "0.steps.0/map:0:0.steps.0.steps.0", occurrence: 1 },
            { path: "0.steps.0/map:1:0.steps.0.steps.0", occurrence: 1 },
          ],
        },
      ],
      replayed: 3,
    });
  });

  it("from a nested node keeps its parent live and replays its earlier sibling", () => {
    const plan = planFork(SEQUENTIAL, "0.steps.1.steps.1", tid("t1"));
    expect(plan.ok && plan.nodes.map((n) => n.path)).toEqual(["0.steps.0", "0.steps.1.steps.0"]);
  });

  it("from the entry replays nothing", () => {
    expect(planFork(SEQUENTIAL, "0", tid("t1"))).toMatchObject({ ok: true, nodes: [], replayed: 0 });
  });

  it("without --from, starts at the first changed node that holds no changed node", () => {
    const changed = SEQUENTIAL.map((n) => (n.path === "0" || n.path.startsWith("0.steps.2") ? { ...n, changed: true } : n));
    const plan = planFork(changed, undefined, tid("t1"));
    expect(plan).toMatchObject({ ok: true, from: { path: "0.steps.2" }, replayed: 4 });
  });

  it("a change earlier than --from moves the fork point to it", () => {
    const changed = SEQUENTIAL.map((n) => (n.path === "0" || n.path === "0.steps.0" ? { ...n, changed: true } : n));
    expect(planFork(changed, "0.steps.2", tid("t1"))).toMatchObject({ ok: true, from: { path: "0.steps.0" }, nodes: [], replayed: 0 });
  });

  it("counts each iteration of a loop's node as its own occurrence", () => {
    const loop = [
      node("0", 0, 40),
      node("0.director", 1, 9, { occurrence: 1 }),
      node("0.director.steps.0", 2, 8, { occurrence: 1 }),
      node("0.director", 10, 19, { occurrence: 2 }),
      node("0.director.steps.0", 11, 18, { occurrence: 2 }),
      node("0.director", 20, 29, { occurrence: 3 }),
    ];
    const plan = planFork(loop, "0.director", tid("t1"));
    expect(plan).toMatchObject({ ok: true, from: { path: "0.director", occurrence: 1 }, nodes: [] });
    const third = planFork(
      loop.map((n) => (n.startedAt === at(20) ? { ...n, changed: true } : n)),
      undefined,
      tid("t1"),
    );
    expect(third).toMatchObject({
      ok: true,
      nodes: [
        { path: "0.director", occurrence: 1, nested: [{ path: "0.director.steps.0", occurrence: 1 }] },
        { path: "0.director", occurrence: 2, nested: [{ path: "0.director.steps.0", occurrence: 2 }] },
      ],
    });
  });

  it("replays a map branch that ended before the fork point, not one still running then", () => {
    const map = [node("0", 0, 30), node("0/map:0:0.steps.0", 1, 5), node("0/map:1:0.steps.0", 1, 25), node("0.steps.1", 6, 29)];
    const plan = planFork(map, "0.steps.1", tid("t1"));
    expect(plan.ok && plan.nodes.map((n) => n.path)).toEqual(["0/map:0:0.steps.0"]);
  });

  it("replays a function template's body with the call that ran it, so a later call of it runs live", () => {
    const calls = [
      node("0", 0, 40),
      node("0.steps.0", 1, 9),
      node("templates.0.body", 2, 8),
      node("0.steps.1", 10, 19),
      node("templates.0.body", 11, 18, { occurrence: 2 }),
    ];
    const plan = planFork(calls, "0.steps.1", tid("t1"));
    expect(plan).toMatchObject({
      ok: true,
      nodes: [{ path: "0.steps.0", occurrence: 1, nested: [{ path: "templates.0.body", occurrence: 1 }] }],
      replayed: 2,
    });
  });

  it("does not replay a suspended node", () => {
    const suspended = SEQUENTIAL.map((n) => (n.path === "0.steps.0" ? { ...n, state: "suspended" as const } : n));
    expect(planFork(suspended, "0.steps.2", tid("t1"))).toMatchObject({ ok: true, replayed: 3 });
  });

  it("refuses an unknown node, a record cut too short to replay, and a fork that changes nothing", () => {
    expect(planFork(SEQUENTIAL, "0.steps.7", tid("t1"))).toMatchObject({
      ok: false,
      code: "NOT_FOUND",
      message: expect.stringContaining("'0.steps.7'"),
    });
    const cut = SEQUENTIAL.map((n) => (n.path === "0.steps.0" ? { ...n, cut: true } : n));
    expect(planFork(cut, "0.steps.2", tid("t1"))).toMatchObject({ ok: false, message: expect.stringContaining("'0.steps.0'") });
    expect(planFork(SEQUENTIAL, undefined, tid("t1"))).toMatchObject({ ok: false, message: expect.stringContaining("nothing to re-run") });
  });
});

describe("changed inputs", () => {
  it("names the inputs whose values differ, and finds them as whole words", () => {
    expect(changedInputs({ a: 1, b: "x", c: [1] }, { a: 1, b: "y", d: true, c: [1] })).toEqual(["b", "d"]);
    expect(mentionsAny('"description":"about {{topic}}"', ["topic"])).toBe(true);
    expect(mentionsAny('"description":"about {{topics}}"', ["topic"])).toBe(false);
    expect(mentionsAny('"from":"topic"', ["topic"])).toBe(true);
  });
});
