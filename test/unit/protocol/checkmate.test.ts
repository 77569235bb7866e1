import { describe, expect, it } from "vitest";
import { parseVerdict, verdictOf } from "../../../protocol/index.js";

describe("checkmate verdict parser", () => {
  it("reads plain JSON", () => {
    const got = parseVerdict(
      '{"result": "PASS", "score": 90, "criteria": [{"item": "a", "pass": true, "evidence": "q"}], "gapSummary": ""}',
    );
    expect(got).toEqual({
      ok: true,
      verdict: { result: "PASS", score: 90, criteria: [{ item: "a", pass: true, evidence: "q" }], gapSummary: "" },
    });
  });

  it("reads a fenced block among prose, gap_summary and a lower-case result", () => {
    const got = parseVerdict('Verdict:\n```json\n{"result": "fail", "score": "35", "gap_summary": "no title"}\n```\nThanks.');
    expect(got).toEqual({ ok: true, verdict: { result: "FAIL", score: 35, criteria: [], gapSummary: "no title" } });
  });

  it("reads the outermost object of unfenced text", () => {
    expect(parseVerdict('Here: {"result": "FAIL", "score": 0, "criteria": [{"item": "x", "pass": false}]} done')).toMatchObject({
      ok: true,
      verdict: { criteria: [{ item: "x", pass: false, evidence: "" }] },
    });
  });

  it("rejects text, a missing score and an unknown result", () => {
    expect(parseVerdict("looks good")).toMatchObject({ ok: false });
    expect(parseVerdict('{"result": "PASS"}')).toMatchObject({ ok: false, error: expect.stringContaining("score") });
    expect(parseVerdict('{"result": "MAYBE", "score": 3}')).toMatchObject({ ok: false, error: expect.stringContaining("result") });
    expect(parseVerdict('{"result": "PASS", "score": 300}')).toMatchObject({ ok: false });
  });

  it("counts an unparseable answer as FAIL with a note", () => {
    expect(verdictOf("ship it")).toMatchObject({
      result: "FAIL",
      score: 0,
      parsed: false,
      note: expect.stringContaining("could not be parsed"),
    });
    expect(verdictOf('{"result": "PASS", "score": 10}')).toMatchObject({ result: "PASS", parsed: true });
  });
});
