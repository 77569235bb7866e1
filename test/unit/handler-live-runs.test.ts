import { describe, expect, it } from "vitest";
import { liveRuns } from "../../actors/handler/live-runs.js";
import { tid } from "../support/ids.js";

describe("a Handler's runs in flight", () => {
  const setup = () => {
    const runs = liveRuns();
    const stopped: string[] = [];
    const add = (taskId: string, nodePath: string) => runs.add(tid(taskId), nodePath, () => stopped.push(`${taskId}/${nodePath}`));
    return { runs, stopped, add };
  };

  it.each([
    { name: "a task's cancel stops its runs only", act: "cancel", want: ["t1/0", "t1/1"] },
    { name: "a node abort stops its node's runs only", act: "abort", want: ["t1/1"] },
    { name: "the Handler's stop stops every run", act: "stop", want: ["t1/0", "t1/1", "t2/1"] },
  ])("$name", ({ act, want }) => {
    const { runs, stopped, add } = setup();
    add("t1", "0");
    add("t1", "1");
    add("t2", "1");
    if (act === "cancel") runs.cancelTask(tid("t1"));
    else if (act === "abort") runs.abortNode(tid("t1"), "1");
    else runs.stopAll();
    expect(stopped).toEqual(want);
  });

  it("forgets a run that ended", () => {
    const { runs, stopped, add } = setup();
    const ended = add("t1", "0");
    add("t1", "1");
    ended();
    runs.cancelTask(tid("t1"));
    expect(stopped).toEqual(["t1/1"]);
    const again = add("t2", "0");
    again();
    again();
    runs.stopAll();
    expect(stopped).toEqual(["t1/1", "t1/1"]);
  });
});
