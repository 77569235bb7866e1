import { describe, expect, it } from "vitest";
import { accumulatedOutputs, CONTEXT_DEFAULTS, contextDefaults, effectiveContext } from "../../machines/evaluator/context-defaults.js";

const row = (inheritContext: string, accumulateData: boolean, accumulationFormat: string, freshContext: string) => ({
  inheritContext,
  accumulateData,
  accumulationFormat,
  freshContext,
});

describe("context defaults (C1, C4)", () => {
  it.each([
    ["atomic", undefined, row("full", false, "notes_only", "disabled")],
    ["atomic", "standard", row("full", false, "notes_only", "disabled")],
    ["atomic", "subtask", row("none", false, "notes_only", "enabled")],
    ["atomic", "director", row("full", false, "notes_only", "disabled")],
    ["atomic", "evaluator", row("full", false, "notes_only", "disabled")],
    ["sequential", undefined, row("full", true, "notes_only", "disabled")],
    ["reduce", undefined, row("none", true, "notes_only", "enabled")],
    ["script", undefined, row("full", false, "notes_only", "disabled")],
    ["director_evaluator_loop", undefined, row("none", true, "notes_only", "enabled")],
  ])("%s:%s → the table's row", (type, subtype, expected) => {
    expect(contextDefaults(type, subtype)).toEqual(expected);
  });

  it("falls back to the type's row for an unknown subtype, and to atomic for an unknown type", () => {
    expect(contextDefaults("sequential", "whatever")).toEqual(CONTEXT_DEFAULTS["sequential"]);
    expect(contextDefaults("map")).toEqual(CONTEXT_DEFAULTS["atomic"]);
    expect(contextDefaults("constructor")).toEqual(CONTEXT_DEFAULTS["atomic"]);
  });

  it("hands out copies: changing one does not change the table", () => {
    const settings = contextDefaults("atomic");
    settings.inheritContext = "none";
    expect(contextDefaults("atomic").inheritContext).toBe("full");
  });
});

describe("effectiveContext", () => {
  it("merges override > explicit > defaults, setting by setting", () => {
    expect(effectiveContext("atomic", "subtask", { inheritContext: "subset" }, { freshContext: "disabled" })).toEqual(
      row("subset", false, "notes_only", "disabled"),
    );
    expect(
      effectiveContext("reduce", undefined, { accumulationFormat: "full_output", freshContext: "disabled" }, { freshContext: "enabled" }),
    ).toEqual(row("none", true, "full_output", "enabled"));
  });

  it("takes a parsed <context_management> block and ignores what it does not state", () => {
    const block = { kind: "context_management" as const, loc: { line: 1, col: 1 }, accumulateData: true, extra: [] };
    expect(effectiveContext("atomic", undefined, block)).toEqual(row("full", true, "notes_only", "disabled"));
    expect(effectiveContext("sequential", undefined, undefined, {})).toEqual(contextDefaults("sequential"));
  });
});

describe("accumulated outputs", () => {
  it("formats notes only, or output and notes, one string per step (1-based)", () => {
    expect(accumulatedOutputs([{ step: 0, notes: { a: 1 } }])).toEqual(['step 1 notes: {"a":1}']);
    expect(accumulatedOutputs([{ step: 1, output: "text", notes: {}, truncated: true }])).toEqual([
      "step 2 output (truncated):\ntext\nstep 2 notes: {}",
    ]);
  });
});
