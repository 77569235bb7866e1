/**
 * A task's own session settings in the template language: `<tools>` (names and globs), `max_turns`, `temperature`,
 * `max_output_tokens` on `<task>`, and `<model fallback>`; bad values are refused at their line and column.
 */
import { describe, expect, it } from "vitest";
import { parseTemplate } from "../../../machines/language/parse.js";
import type { TaskNode } from "../../../machines/language/ast.js";
import { selectTools, splitToolList, toolMatches } from "../../../protocol/index.js";

function entry(xml: string): TaskNode {
  const outcome = parseTemplate(xml);
  if (!outcome.ok) throw new Error(outcome.error.message);
  const node = outcome.document.entry;
  if (node?.kind !== "task") throw new Error("no task");
  return node;
}

function refused(xml: string) {
  const outcome = parseTemplate(xml);
  if (outcome.ok) throw new Error("expected an error");
  return outcome.error;
}

describe("<tools>", () => {
  it("reads names and globs separated by commas or whitespace, without repeats", () => {
    const task = entry(`<task><description>x</description><tools>read_file, fs__*\n  get_weather read_file</tools></task>`);
    expect(task.tools?.patterns).toEqual(["read_file", "fs__*", "get_weather"]);
    expect(task.tools?.loc).toEqual({ line: 1, col: 35 });
  });

  it("an empty <tools/> offers no tools; a task without it has none set", () => {
    expect(entry(`<task><description>x</description><tools/></task>`).tools?.patterns).toEqual([]);
    expect(entry(`<task><description>x</description></task>`).tools).toBeUndefined();
  });

  it("refuses a name that is not a tool name or glob, at its line and column", () => {
    const error = refused(`<task>\n  <description>x</description>\n  <tools>read_file, web.search</tools>\n</task>`);
    expect(error).toMatchObject({ code: "INVALID_TEMPLATE", line: 3, col: 3, element: "tools" });
    expect(error.message).toContain("'web.search'");
  });
});

describe("session attributes of <task>", () => {
  it("reads max_turns, temperature and max_output_tokens, and keeps them out of the other attributes", () => {
    const task = entry(`<task max_turns="4" temperature="0.25" max_output_tokens="800" max_cost="1"><description>x</description></task>`);
    expect(task).toMatchObject({ maxTurns: 4, temperature: 0.25, maxOutputTokens: 800 });
    expect(task.attributes).toEqual({ max_cost: "1" });
  });

  it.each([
    [`max_turns="0"`, "invalid max_turns attribute of <task> '0': expected an integer from 1 to 100"],
    [`max_turns="2.5"`, "invalid max_turns attribute of <task> '2.5': expected an integer from 1 to 100"],
    [`max_turns="101"`, "expected an integer from 1 to 100"],
    [`temperature="2.1"`, "invalid temperature attribute of <task> '2.1': expected a number from 0 to 2"],
    [`temperature="-1"`, "expected a number from 0 to 2"],
    [`temperature="hot"`, "expected a number from 0 to 2"],
    [`max_output_tokens=""`, "invalid max_output_tokens attribute of <task> '': expected an integer from 1 to 1000000"],
  ])("refuses %s at the task's line and column", (attr, message) => {
    const error = refused(`<task type="sequential"><steps>\n  <task ${attr}><description>x</description></task>\n</steps></task>`);
    expect(error).toMatchObject({ code: "INVALID_TEMPLATE", line: 2, col: 3, element: "task" });
    expect(error.message).toContain(message);
  });

  it("<model fallback> lists the fallback models in order", () => {
    expect(entry(`<task><description>x</description><model fallback="b, c">a</model></task>`).model).toMatchObject({
      name: "a",
      fallback: ["b", "c"],
    });
  });
});

describe("tool lists", () => {
  it("match names exactly and globs anywhere", () => {
    expect(toolMatches("read_file", "read_file")).toBe(true);
    expect(toolMatches("read_file", "read_files")).toBe(false);
    expect(toolMatches("fs__*", "fs__read_text_file")).toBe(true);
    expect(toolMatches("fs__*", "fs_x")).toBe(false);
    expect(toolMatches("*", "anything")).toBe(true);
    expect(toolMatches("a*b*c", "a_b_c")).toBe(true);
    expect(toolMatches("a*b*c", "abc")).toBe(true);
    expect(toolMatches("a*bc*c", "abc")).toBe(false);
  });

  it("select the named tools in the Handler's order, and name what selects nothing", () => {
    const names = ["read_file", "list_files", "fs__read_text_file", "fs__list_directory", "web__echo"];
    expect(selectTools(["fs__*", "read_file", "get_weather", "db__*"], names)).toEqual({
      selected: ["read_file", "fs__read_text_file", "fs__list_directory"],
      missing: ["get_weather", "db__*"],
    });
    expect(splitToolList(" a, b\n c ,, ")).toEqual(["a", "b", "c"]);
  });
});

describe("settings on a task without a session of its own", () => {
  it("are kept but warned about: a sequential runs no session", () => {
    const outcome = parseTemplate(
      `<task type="sequential" temperature="0.5">\n<tools>read_file</tools><steps><task><description>x</description></task></steps></task>`,
    );
    if (!outcome.ok) throw new Error(outcome.error.message);
    expect(outcome.warnings).toEqual([
      {
        kind: "ignored-setting",
        message: "<tools>, temperature set the session of an atomic task; on a sequential task they are ignored",
        line: 1,
        col: 1,
      },
    ]);
  });
});
