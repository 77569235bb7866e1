import { describe, expect, it } from "vitest";
import { TaskResult, taskFailure } from "../../../protocol/index.js";

describe("taskFailure", () => {
  it("builds a valid FAILED result with a TASK_FAILURE error and no output", () => {
    const result = taskFailure("input_validation_failure", "missing <inputs>");
    expect(result).toEqual({
      content: "",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "input_validation_failure", message: "missing <inputs>" },
    });
    expect(TaskResult.parse(result)).toEqual(result);
  });

  it("carries details only when given", () => {
    expect(taskFailure("execution_halted", "stop", { at: "0.1" }).error).toEqual({
      type: "TASK_FAILURE",
      reason: "execution_halted",
      message: "stop",
      details: { at: "0.1" },
    });
    expect(taskFailure("execution_halted", "stop").error).not.toHaveProperty("details");
  });
});
