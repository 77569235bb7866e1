/**
 * `dirigent run` prints a map's progress as `map 5/8 done` lines, names a branch that did not complete, and names a
 * map that is not the task's root node by its path, so nested maps whose branches interleave stay apart. Fed the task
 * events a Director relays from the Evaluator's reports, decoded through the protocol schemas.
 */
import { describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { checkmateLine } from "../../runtime/cli/checkmate.js";
import { createEventPrinter, formatEvent, mapProgressText } from "../../runtime/cli/output.js";
import { branchFinished, branchStarted, mapStarted, relayed } from "../support/map-events.js";

const INNER = "0/map:1:0.steps.0";

/** A map over a list of 3 at the root, 2 at once, collecting failures; branch 2 runs a map of 2 steps inside. */
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
  branchFinished(INNER, `${INNER}.steps.0`, 1, 2, "CANCELLED", 2),
  branchFinished("0", "0/map:1", 2, 3, "COMPLETE", 3),
];

describe("map progress in the CLI", () => {
  const events = relayed("map-task", reports);

  it("words each report: how far its map is, the branches that did not complete, nested maps by their path", () => {
    expect(events.map(mapProgressText)).toEqual([
      "map started: 3 branches, 2 at once, failures collected",
      "branch 1/3",
      "branch 2/3",
      `map ${INNER} started: 2 branches, 2 at once`,
      `map ${INNER}: branch 1/2`,
      `map ${INNER}: branch 2/2`,
      "map 1/3 done",
      "branch 3/3",
      `map ${INNER}: 1/2 done`,
      "map 2/3 done (branch 3 FAILED)",
      `map ${INNER}: 2/2 done (branch 1 CANCELLED)`,
      "map 3/3 done",
    ]);
  });

  it("prints them in the event lines of dirigent run, in place of the report's message", () => {
    const out: string[] = [];
    const printer = createEventPrinter((text) => out.push(text));
    for (const event of events) printer.event(event);
    printer.end();
    const lines = out.join("").trimEnd().split("\n");
    expect(lines).toHaveLength(reports.length);
    expect(lines[6]).toBe("[  9] running             branch.finished  map 1/3 done");
    expect(lines[9]).toBe("[ 12] running             branch.finished  map 2/3 done (branch 3 FAILED)");
    expect(lines[10]).toBe(`[ 13] running             branch.finished  map ${INNER}: 2/2 done (branch 1 CANCELLED)`);
  });

  it("prints a report with malformed data as sent, and other events unchanged", () => {
    const [bad] = relayed("map-task", [{ event: "branch.finished", message: "branch 9/8 ???", data: { mapPath: "0", branch: "9" } }]);
    expect(mapProgressText(bad as TaskEvent)).toBeUndefined();
    expect(formatEvent(bad as TaskEvent)).toBe("[  3] running             branch.finished  branch 9/8 ???");
    const [step] = relayed("map-task", [{ event: "step.started", message: "step 1/2", data: { nodePath: "0.steps.0" } }]);
    expect(formatEvent(step as TaskEvent)).toBe("[  3] running             step.started  step 1/2");
  });

  it("prints no control characters of a node path", () => {
    const [event] = relayed("map-task", [branchFinished("0.steps.1\u001b[2J", "x", 1, 2, "FAILED", 1)]);
    expect(mapProgressText(event as TaskEvent)).toBe("map 0.steps.1?[2J: 1/2 done (branch 1 FAILED)");
  });

  it("names each map at the step of a map over a list by the scoped path its branches' node paths give", () => {
    // As the Evaluator reports them: the inner maps' branches name the template node (`0.steps.0`) as their mapPath.
    const inner = (i: number) => `0/map:${i}:0.steps.0`;
    const nested = relayed("map-task", [
      mapStarted(inner(0), 2, 10),
      branchStarted("0.steps.0", `${inner(0)}.steps.1`, 2, 2),
      branchFinished("0.steps.0", `${inner(1)}.steps.0`, 1, 2, "FAILED", 1),
      branchFinished("0", "0/map:1", 2, 2, "FAILED", 1),
    ]);
    expect(nested.map(mapProgressText)).toEqual([
      "map 0/map:0:0.steps.0 started: 2 branches, 2 at once",
      "map 0/map:0:0.steps.0: branch 2/2",
      "map 0/map:1:0.steps.0: 1/2 done (branch 1 FAILED)",
      "map 1/2 done (branch 2 FAILED)",
    ]);
  });

  it("prints how far a map is in dirigent checkmate too, not each branch's start", () => {
    expect(events.map(checkmateLine).filter(Boolean)).toEqual([
      "map 1/3 done",
      `map ${INNER}: 1/2 done`,
      "map 2/3 done (branch 3 FAILED)",
      `map ${INNER}: 2/2 done (branch 1 CANCELLED)`,
      "map 3/3 done",
    ]);
  });
});
