import { describe, expect, it } from "vitest";
import { createSubjects, InvalidSubjectError } from "../../../protocol/index.js";

describe("subjects", () => {
  it("builds the public contract under the default root", () => {
    const s = createSubjects();
    expect(s.submit).toBe("dirigent.tasks.submit");
    expect(s.taskEvents("abc")).toBe("dirigent.tasks.abc.events");
    expect(s.taskResult("abc")).toBe("dirigent.tasks.abc.result");
    expect(s.taskGet("abc")).toBe("dirigent.tasks.abc.get");
    expect(s.taskCancel("abc")).toBe("dirigent.tasks.abc.cancel");
    expect(s.taskIdOf("dirigent.tasks.abc.get")).toBe("abc");
  });

  it("supports a multi-token root and derives stream names from it", () => {
    const s = createSubjects("acme.dirigent-2");
    expect(s.taskGet("x")).toBe("acme.dirigent-2.tasks.x.get");
    expect(s.taskIdOf("acme.dirigent-2.tasks.x.get")).toBe("x");
    expect(s.intakeStream).toBe("ACME_DIRIGENT_2_INTAKE");
  });

  it.each(["", "Upper", "a..b", "a b", "a.*", "a.>", "trailing."])("refuses the root %j", (root) => {
    expect(() => createSubjects(root)).toThrow(InvalidSubjectError);
  });

  it("refuses a task id that would change a subject's meaning", () => {
    const s = createSubjects();
    expect(() => s.taskEvents("a.b")).toThrow(/illegal task id token 'a.b'/);
    expect(() => s.taskEvents("*")).toThrow(InvalidSubjectError);
  });
});
