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

  it("takes a missing score as 100 for a PASS and 0 for a FAIL, and says so", () => {
    expect(parseVerdict('{"result": "PASS"}')).toMatchObject({ ok: true, verdict: { result: "PASS", score: 100 }, scoreMissing: true });
    expect(parseVerdict('{"result": "fail", "score": null, "gapSummary": "g"}')).toMatchObject({
      ok: true,
      verdict: { result: "FAIL", score: 0, gapSummary: "g" },
      scoreMissing: true,
    });
    expect(verdictOf('{"result": "PASS", "criteria": []}')).toMatchObject({
      result: "PASS",
      score: 100,
      parsed: true,
      note: "the judge gave no score; 100 taken for ranking",
    });
    expect(verdictOf('{"result": "PASS", "score": 70}')).not.toHaveProperty("note");
  });

  it("rejects text, a bad score and an unknown result", () => {
    expect(parseVerdict("looks good")).toMatchObject({ ok: false });
    expect(parseVerdict('{"result": "PASS", "score": "high"}')).toMatchObject({ ok: false, error: expect.stringContaining("score") });
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
