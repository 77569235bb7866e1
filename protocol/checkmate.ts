/**
 * The verdict of the checkmate judge loop (intake → worker → judge until PASS): the judge answers JSON
 * `{result: PASS|FAIL, score, criteria: [{item, pass, evidence}], gapSummary}`, possibly inside a ```json fence.
 * {@link parseVerdict} reads it from a model's text and validates it; best-attempt selection uses the typed `score`,
 * never a free-text field, so a judge that leaves out a `**Score:**` line cannot leave the run without a best attempt.
 */
import { z } from "zod";
import { fencedBlock } from "./fence.js";
import { messageOf } from "./errors.js";

/** One criterion as the judge saw it. */
export const VerdictCriterion = z.object({
  item: z.string(),
  pass: z.boolean(),
  evidence: z.string().default(""),
});
export type VerdictCriterion = z.infer<typeof VerdictCriterion>;

/** A judge's verdict on one attempt. `score`: 0–100, higher is better. */
export const CheckmateVerdict = z.object({
  result: z.preprocess((v) => (typeof v === "string" ? v.trim().toUpperCase() : v), z.enum(["PASS", "FAIL"])),
  score: z.preprocess(
    (v) => (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v)) ? Number(v) : v),
    z.number().finite().min(0).max(100),
  ),
  criteria: z.array(VerdictCriterion).default([]),
  gapSummary: z.string().default(""),
});
export type CheckmateVerdict = z.infer<typeof CheckmateVerdict>;

/** Score a verdict without one is given for ranking: a PASS is the best attempt, a FAIL the worst. */
export const MISSING_SCORE = { PASS: 100, FAIL: 0 } as const;

/** A verdict as the loop keeps it: `parsed: false` when the judge's answer was not a valid verdict (then FAIL). */
export type StoredVerdict = CheckmateVerdict & { parsed: boolean; note?: string };

/** The JSON text of a model answer: a fenced block if there is one, else the outermost `{…}`. */
function jsonText(text: string): string {
  const fenced = fencedBlock(text);
  if (fenced?.includes("{")) return fenced.trim();
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  return start >= 0 && end > start ? text.slice(start, end + 1) : text.trim();
}

/**
 * Reads a verdict from a judge's answer; `gap_summary` is accepted for `gapSummary`. A PASS or FAIL without a score
 * gets the score of {@link MISSING_SCORE} (`scoreMissing` says so).
 */
export function parseVerdict(text: string): { ok: true; verdict: CheckmateVerdict; scoreMissing?: true } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(jsonText(text));
  } catch (err) {
    return { ok: false, error: `not JSON: ${messageOf(err)}` };
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value) && !("gapSummary" in value) && "gap_summary" in value) {
    value = { ...value, gapSummary: Reflect.get(value, "gap_summary") };
  }
  const scored = withScore(value);
  const parsed = CheckmateVerdict.safeParse(scored);
  if (!parsed.success)
    return { ok: false, error: parsed.error.issues.map((i) => `${i.path.join(".") || "(verdict)"}: ${i.message}`).join("; ") };
  return { ok: true, verdict: parsed.data, ...(scored === value ? {} : { scoreMissing: true as const }) };
}

/** A verdict object whose `result` is PASS or FAIL and that has no score: the score is taken from {@link MISSING_SCORE}. */
function withScore(value: unknown): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !scoreMissing(value)) return value;
  const result = Reflect.get(value, "result");
  const verdict = typeof result === "string" ? result.trim().toUpperCase() : "";
  return verdict === "PASS" || verdict === "FAIL" ? { ...value, score: MISSING_SCORE[verdict] } : value;
}

function scoreMissing(value: object): boolean {
  const score: unknown = Reflect.get(value, "score");
  return score === undefined || score === null || (typeof score === "string" && score.trim() === "");
}

/**
 * The verdict a judge's answer counts as: the parsed one, or FAIL with score 0 and a note saying why. A verdict
 * without a score keeps its result (a PASS is a PASS) with the score of {@link MISSING_SCORE} and a note.
 */
export function verdictOf(text: string): StoredVerdict {
  const got = parseVerdict(text);
  if (got.ok) {
    const note = `the judge gave no score; ${got.verdict.score} taken for ranking`;
    return { ...got.verdict, parsed: true, ...(got.scoreMissing ? { note } : {}) };
  }
  return {
    result: "FAIL",
    score: 0,
    criteria: [],
    gapSummary: "",
    parsed: false,
    note: `the judge's verdict could not be parsed (${got.error}); counted as FAIL`,
  };
}

/** Marker an intake answer uses to ask the user questions instead of writing criteria; such an answer is never locked in as criteria. */
export const NEEDS_CLARIFICATION = "[NEEDS_CLARIFICATION]";
