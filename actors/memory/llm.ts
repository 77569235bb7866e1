/**
 * Associative matching by the model (`--llm-match`), for relevance that shared words alone miss: MiniSearch
 * ranks the index, then the model chooses among the best candidates and answers a JSON array of
 * `{path, relevance, score}`. Its answer is validated: only paths among the candidates are kept. An unusable
 * answer, or a model that fails, falls back to the MiniSearch ranking, and the reply's `context` says so.
 */
import { z } from "zod";
import type { FileMatch, MatchRequest } from "../../protocol/index.js";
import type { ChatMessage } from "../../machines/handler/session-context.js";
import type { CallModel } from "../model.js";
import type { Ranked } from "./rank.js";
import { messageOf } from "../../protocol/errors.js";

/** Candidates the model chooses among, by default. */
export const LLM_CANDIDATES = 30;
/** How long the model may take before the MiniSearch ranking is answered instead (the Evaluator waits 30 s). */
export const LLM_MATCH_TIMEOUT_MS = 20_000;

/** How the Memory role asks the model. */
export interface LlmMatchOptions {
  callModel: CallModel;
  /** Model id. */
  model: string;
  /** Candidates offered to the model. Default {@link LLM_CANDIDATES}. */
  candidates?: number;
  /** Default {@link LLM_MATCH_TIMEOUT_MS}. */
  timeoutMs?: number;
}

const SYSTEM = [
  "You select the files relevant to a task from a list of candidate files of a file index.",
  "Each candidate is given as its path and a one-line description; you cannot read the files.",
  'Answer with a JSON array only, best first: [{"path": "<a path from the list, exactly>", "relevance": "<why, in a few words>", "score": <0..1>}].',
  "Leave out files that are not relevant; answer [] when none is.",
].join("\n");

const MAX_FIELD = 600;

function clip(text: string, max = MAX_FIELD): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

/** The messages asking the model to choose among `candidates` for `request`. */
export function llmMatchPrompt(request: MatchRequest, candidates: readonly Ranked[], limit: number): ChatMessage[] {
  const lines = [
    `Task: ${clip(request.templateDescription, 2000)}`,
    `Task type: ${request.templateType}${request.templateSubtype ? `:${request.templateSubtype}` : ""}`,
  ];
  if (request.taskText) lines.push(`Task text: ${clip(request.taskText, 2000)}`);
  const inputs = Object.entries(request.inputs).map(([k, v]) => `${k}=${clip(typeof v === "string" ? v : (JSON.stringify(v) ?? ""), 200)}`);
  if (inputs.length > 0) lines.push(`Inputs: ${inputs.join("; ")}`);
  if (request.inheritedContext) lines.push(`Inherited context: ${clip(request.inheritedContext)}`);
  for (const [i, output] of (request.previousOutputs ?? []).slice(-3).entries()) lines.push(`Earlier output ${i + 1}: ${clip(output)}`);
  lines.push("", `Candidate files (at most ${limit} to choose):`);
  for (const { entry } of candidates) lines.push(`- ${entry.path} :: ${clip(entry.metadata, 300)}`);
  return [
    { role: "system", content: SYSTEM },
    { role: "user", content: lines.join("\n") },
  ];
}

const Choice = z.array(
  z.object({
    path: z.string(),
    relevance: z.string().optional(),
    score: z.number().optional(),
  }),
);

/**
 * Reads the model's answer: a JSON array (possibly in a code fence or after some words) of
 * `{path, relevance?, score?}`. Keeps paths among the candidates, once each, at most `limit`, ordered by score
 * (the model's order for equal or missing scores); scores are clamped to [0, 1].
 * @returns the matches, or the reason the answer is unusable.
 */
export function parseChoice(
  content: string,
  candidates: readonly Ranked[],
  limit: number,
): { ok: true; matches: FileMatch[] } | { ok: false; reason: string } {
  const start = content.indexOf("[");
  const end = content.lastIndexOf("]");
  if (start < 0 || end < start) return { ok: false, reason: "the answer holds no JSON array" };
  let json: unknown;
  try {
    json = JSON.parse(content.slice(start, end + 1));
  } catch (err) {
    return { ok: false, reason: `the answer is not valid JSON (${messageOf(err)})` };
  }
  const parsed = Choice.safeParse(json);
  if (!parsed.success)
    return { ok: false, reason: `the answer is not an array of {path, relevance, score}: ${parsed.error.issues[0]?.message ?? "invalid"}` };
  const known = new Map(candidates.map((c) => [c.entry.path, c]));
  const seen = new Set<string>();
  const kept: { match: FileMatch; order: number }[] = [];
  for (const [order, item] of parsed.data.entries()) {
    const candidate = known.get(item.path.trim());
    if (candidate === undefined || seen.has(candidate.entry.path)) continue;
    seen.add(candidate.entry.path);
    const score = item.score === undefined || !Number.isFinite(item.score) ? undefined : Math.min(1, Math.max(0, item.score));
    const relevance = item.relevance?.trim()
      ? clip(item.relevance.trim(), 300)
      : `chosen by the model: ${clip(candidate.entry.metadata, 160)}`;
    kept.push({ match: { path: candidate.entry.path, relevance, ...(score === undefined ? {} : { score }) }, order });
  }
  if (parsed.data.length > 0 && kept.length === 0) return { ok: false, reason: "the answer names none of the candidate paths" };
  kept.sort((a, b) => (b.match.score ?? -1) - (a.match.score ?? -1) || a.order - b.order);
  return { ok: true, matches: kept.slice(0, limit).map((k) => k.match) };
}

/**
 * Lets the model choose among `candidates` (MiniSearch's best, best first).
 * @returns the model's choice, or MiniSearch's ranking with a note in `context` when the model fails or answers
 * something unusable.
 */
export async function chooseWithModel(
  request: MatchRequest,
  candidates: readonly Ranked[],
  fallback: readonly FileMatch[],
  options: LlmMatchOptions & { limit: number; total: number; signal: AbortSignal },
): Promise<{ context: string; matches: FileMatch[] }> {
  const ranked = (note: string) => ({
    context: `${describeCount(fallback.length, options.total)}, ranked by MiniSearch (${note})`,
    matches: [...fallback],
  });
  if (candidates.length === 0) return { context: "no relevant files found", matches: [] };
  const timeout = AbortSignal.timeout(options.timeoutMs ?? LLM_MATCH_TIMEOUT_MS);
  const signal = AbortSignal.any([options.signal, timeout]);
  let content: string;
  try {
    content = (await options.callModel({ model: options.model, messages: llmMatchPrompt(request, candidates, options.limit) }, signal))
      .content;
  } catch (err) {
    const why = timeout.aborted
      ? `the model did not answer within ${options.timeoutMs ?? LLM_MATCH_TIMEOUT_MS} ms`
      : `the model failed: ${messageOf(err)}`;
    return ranked(clip(why, 300));
  }
  const choice = parseChoice(content, candidates, options.limit);
  if (!choice.ok) return ranked(`the model's answer was unusable: ${choice.reason}`);
  if (choice.matches.length === 0) return { context: `the model found none of ${candidates.length} candidates relevant`, matches: [] };
  return {
    context: `${describeCount(choice.matches.length, options.total)}, chosen by the model among ${candidates.length} candidates`,
    matches: choice.matches,
  };
}

/** `3 relevant files of 1835 indexed`. */
export function describeCount(found: number, total: number): string {
  return found === 0 ? "no relevant files found" : `${found} relevant file${found === 1 ? "" : "s"} of ${total} indexed`;
}
