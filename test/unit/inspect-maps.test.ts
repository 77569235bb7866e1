/**
 * The inspector's model of a task's `map` nodes: each map with its branches by number and their states, derived from
 * the task events a Director relays from the Evaluator's reports, published on the bus and read by the inspector
 * server as it reads every task event (decoded through the protocol schema), and served to the page. Reports
 * arrive interleaved, replayed twice or out of order, malformed or hostile; none may set a finished branch running
 * again, and the model stays bounded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createSubjects, encode, TaskEvent } from "../../protocol/index.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";
import { MAX_BRANCHES, MAX_MAPS, MAX_TASK_BRANCHES, type MapView } from "../../runtime/inspect/maps.js";
import { startInspectServer, type InspectServer } from "../../runtime/inspect/server.js";
import { InspectState, type TaskView } from "../../runtime/inspect/state.js";
import { branchFinished, branchStarted, mapStarted, relayed } from "../support/map-events.js";
import { tid } from "../support/ids.js";

const INNER = "0/map:1:0.steps.0";

/** A map over a list of 3 at the root, 2 at once; branch 2 runs a map of 2 steps; branch 3 fails. */
const reports = [
  mapStarted("0", 3, 2, "collect"),
  branchStarted("0", "0/map:0", 1, 3),
  branchStarted("0", "0/map:1", 2, 3),
  mapStarted(INNER, 2, 2),
  branchStarted(INNER, `${INNER}.steps.0`, 1, 2),
  branchStarted(INNER, `${INNER}.steps.1`, 2, 2),
  branchFinished("0", "0/map:0", 1, 3, "COMPLETE", 1),
  branchStarted("0", "0/map:2", 3, 3),
  branchFinished(INNER, `${INNER}.steps.1`, 2, 2, "COMPLETE", 1),
  branchFinished("0", "0/map:2", 3, 3, "FAILED", 2),
];

let server: InspectServer | undefined;
let bus: MemoryBus | undefined;
afterEach(async () => {
  await server?.close();
  await bus?.close();
});

describe("the inspector's map view", () => {
  it("groups the branches under their map, by number, with their states, as the server serves the task", async () => {
    const errors: unknown[] = [];
    bus = new MemoryBus({ onError: (err) => void errors.push(err) });
    const subjects = createSubjects("mapview");
    server = await startInspectServer({ bus, subjects, port: 0 });
    const taskId = "map-task";
    // Published as a Director publishes task events; the last branch of the outer map still runs.
    for (const event of relayed(taskId, reports)) bus.publish(subjects.taskEvents(taskId), encode(TaskEvent, event));
    await bus.flush();

    const res = await fetch(new URL(`/api/tasks/${taskId}`, server.url));
    const task = (await res.json()) as TaskView;
    expect(task.maps).toEqual([
      {
        nodePath: "0",
        total: 3,
        maxParallel: 2,
        onFailure: "collect",
        finished: 2,
        branches: [
          { branch: 1, nodePath: "0/map:0", state: "COMPLETE" },
          { branch: 2, nodePath: "0/map:1", state: "running" },
          { branch: 3, nodePath: "0/map:2", state: "FAILED" },
        ],
      },
      {
        nodePath: INNER,
        total: 2,
        maxParallel: 2,
        onFailure: "fail_fast",
        finished: 1,
        branches: [
          { branch: 1, nodePath: `${INNER}.steps.0`, state: "running" },
          { branch: 2, nodePath: `${INNER}.steps.1`, state: "COMPLETE" },
        ],
      },
    ] satisfies MapView[]);
    // The map and branch nodes are in the task tree too.
    expect(task.nodes).toEqual(expect.arrayContaining(["0", "0/map:0", "0/map:2", INNER, `${INNER}.steps.0`]));
    // And the page's first load carries the same.
    const state = (await (await fetch(new URL("/api/state", server.url))).json()) as { tasks: TaskView[] };
    expect(state.tasks.find((t) => t.taskId === taskId)?.maps).toEqual(task.maps);
    expect(errors).toEqual([]);
  });

  it("keeps a finished branch finished when an older report arrives after it, and shows a rerun", () => {
    const state = new InspectState();
    const [started, finished, rerun] = relayed("t", [
      branchStarted("0", "0.steps.0", 1, 2),
      branchFinished("0", "0.steps.0", 1, 2, "CANCELLED", 1),
      branchStarted("0", "0.steps.0", 1, 2),
    ]) as [TaskEvent, TaskEvent, TaskEvent];
    state.applyTaskEvent(finished);
    state.applyTaskEvent(started, true);
    // Known from its branches only: the map's total, no parallelism yet.
    expect(state.task(tid("t"))?.maps).toEqual([
      { nodePath: "0", total: 2, finished: 1, branches: [{ branch: 1, nodePath: "0.steps.0", state: "CANCELLED" }] },
    ]);
    state.applyTaskEvent(finished);
    state.applyTaskEvent(rerun);
    expect(state.task(tid("t"))?.maps?.[0]?.branches).toEqual([{ branch: 1, nodePath: "0.steps.0", state: "running" }]);
  });

  it("keeps the maps at the step of a map over a list apart, by the scoped node paths of their branches", () => {
    const state = new InspectState();
    // As the Evaluator reports them: the inner maps' branches name the template node (`0.steps.0`) as their mapPath.
    const inner = (i: number) => `0/map:${i}:0.steps.0`;
    const events = relayed("t", [
      mapStarted("0", 2, 2),
      branchStarted("0", "0/map:0", 1, 2),
      branchStarted("0", "0/map:1", 2, 2),
      mapStarted(inner(0), 2, 10),
      branchStarted("0.steps.0", `${inner(0)}.steps.0`, 1, 2),
      mapStarted(inner(1), 2, 10),
      branchStarted("0.steps.0", `${inner(1)}.steps.1`, 2, 2),
      branchFinished("0.steps.0", `${inner(1)}.steps.1`, 2, 2, "COMPLETE", 1),
    ]);
    for (const event of events) state.applyTaskEvent(event);
    const maps = state.task(tid("t"))?.maps ?? [];
    expect(maps.map((m) => m.nodePath)).toEqual(["0", inner(0), inner(1)]);
    expect(maps[1]?.branches).toEqual([{ branch: 1, nodePath: `${inner(0)}.steps.0`, state: "running" }]);
    expect(maps[2]).toMatchObject({ finished: 1, branches: [{ branch: 2, nodePath: `${inner(1)}.steps.1`, state: "COMPLETE" }] });
  });

  it("ignores reports with malformed data, and keeps a task without maps as it was", () => {
    const state = new InspectState();
    const events = relayed("t", [
      { event: "map.started", message: "map started", data: { nodePath: "0", kind: "map", total: "8" } },
      { event: "branch.started", message: "branch 1/8", data: { nodePath: "0.steps.0", branch: 1, total: 8 } },
      {
        event: "branch.finished",
        message: "branch 1/8",
        data: { nodePath: "0.steps.0", mapPath: "0", branch: 1, total: 8, status: "DONE", finished: 1 },
      },
      { event: "branch.started", message: "branch 0/8", data: { nodePath: "0.steps.0", mapPath: "0", branch: 0, total: 8 } },
      { event: "step.started", message: "step 1/2", data: { nodePath: "0.steps.0" } },
    ]);
    for (const event of events) state.applyTaskEvent(event);
    expect(state.task(tid("t"))).not.toHaveProperty("maps");
    expect(state.task(tid("t"))?.timeline).toHaveLength(events.length);
  });

  it("keeps at most the first MAX_BRANCHES branches of a map, and the count of those finished", () => {
    const state = new InspectState();
    const total = MAX_BRANCHES + 50;
    const many = Array.from({ length: total }, (_, i) => branchFinished("0", `0/map:${i}`, i + 1, total, "COMPLETE", i + 1));
    for (const event of relayed("t", many)) state.applyTaskEvent(event);
    const [map] = state.task(tid("t"))?.maps ?? [];
    expect(map?.branches).toHaveLength(MAX_BRANCHES);
    expect(map?.branches.at(-1)?.branch).toBe(MAX_BRANCHES);
    expect(map).toMatchObject({ total, finished: total });
  });

  it("keeps at most MAX_TASK_BRANCHES branches and MAX_MAPS maps of a task, and says which maps lost branches", () => {
    const state = new InspectState({ maxTimeline: 10 });
    const maps = MAX_TASK_BRANCHES / 200 + 1;
    const reports = Array.from({ length: maps }, (_, m) =>
      Array.from({ length: 200 }, (_, i) => branchStarted(`0.steps.${m}`, `0.steps.${m}/map:${i}`, i + 1, 200)),
    ).flat();
    for (const event of relayed("t", reports)) state.applyTaskEvent(event);
    const kept = state.task(tid("t"))?.maps ?? [];
    expect(kept.reduce((n, m) => n + m.branches.length, 0)).toBe(MAX_TASK_BRANCHES);
    expect(kept.at(-1)).toMatchObject({ branches: [], truncated: true });
    expect(kept.filter((m) => m.truncated)).toHaveLength(1);
    // A known branch still changes once the task is full.
    state.applyTaskEvent(relayed("t", [branchFinished("0.steps.0", "0.steps.0/map:0", 1, 200, "FAILED", 1)], 5000)[0] as TaskEvent);
    expect(state.task(tid("t"))?.maps?.[0]?.branches[0]?.state).toBe("FAILED");
    for (const event of relayed(
      "t",
      Array.from({ length: MAX_MAPS + 5 }, (_, m) => mapStarted(`1.steps.${m}`, 2, 1)),
      6000,
    ))
      state.applyTaskEvent(event);
    expect(state.task(tid("t"))?.maps).toHaveLength(MAX_MAPS);
  });
});
