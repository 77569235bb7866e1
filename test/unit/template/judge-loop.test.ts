import { describe, expect, it } from "vitest";
import { summarize } from "../../../actors/evaluator/nodes.js";
import { parseTemplate } from "../../../machines/language/parse.js";

describe("judge_loop templates", () => {
  it("parse without warnings, keeping <worker>/<judge> prompts and the loop's settings", () => {
    const parsed = parseTemplate(`<task type="judge_loop" criteria_judge="true" max_intake_rounds="2" worker_timeout="60">
  <description>Write {{thing}}</description>
  <criteria><item>short</item></criteria>
  <max_iterations>4</max_iterations>
  <worker>Be brief.</worker>
  <judge>Be strict.</judge>
</task>`);
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.warnings).toEqual([]);
    const task = parsed.document.entry;
    if (task?.kind !== "task") throw new Error("no task");
    expect(task.extra.map((e) => [e.name, e.text])).toEqual([
      ["worker", "Be brief."],
      ["judge", "Be strict."],
    ]);
    expect(task.criteria).toEqual(["short"]);
    expect(summarize(task)).toMatchObject({ type: "judge_loop", checkmate: { maxIterations: 4, criteriaJudge: true, maxIntakeRounds: 2 } });
  });

  it("keeps <worker> outside a judge_loop an unsupported element, as before", () => {
    const parsed = parseTemplate(`<task><description>x</description><worker>y</worker></task>`);
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.warnings.map((w) => w.kind)).toEqual(["unsupported-element"]);
  });
});
