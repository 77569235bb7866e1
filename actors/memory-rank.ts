/**
 * Ranking of index entries for associative matching: a MiniSearch full-text index over each file's name, its
 * directories and its metadata, queried with prefix and fuzzy terms.
 */
import MiniSearch from "minisearch";
import type { FileMatch, MatchRequest } from "../protocol/index.js";
import type { IndexEntry } from "../machines/memory.js";

/** At most this many matches unless the caller asks otherwise. */
export const DEFAULT_MATCH_LIMIT = 20;

const STOPWORDS = new Set(
  "a an and are as at be by for from has have in into is it its of on or that the this to was were will with what which who how all any can do does".split(" "),
);

/**
 * Splits text into lower-case words; a camelCase word also yields its parts
 * (`parseTemplate` → `parsetemplate`, `parse`, `template`).
 */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const token of text.split(/[^\p{L}\p{N}]+/u)) {
    const parts = token.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2").split(" ");
    for (const word of parts.length > 1 ? [token, ...parts] : parts) {
      const lower = word.toLowerCase();
      if (lower.length > 1 && !STOPWORDS.has(lower)) out.push(lower);
    }
  }
  return out;
}

interface Doc {
  id: number;
  /** The entry's words, space-separated: the file name twice (a match there counts more), its last directories, the metadata. */
  text: string;
}

/** The words of a request that make up the query: the description, the seed-era text and short string inputs. */
export function queryText(request: MatchRequest): string {
  const parts = [request.templateDescription, request.taskText ?? ""];
  for (const value of Object.values(request.inputs)) if (typeof value === "string" && value.length <= 200) parts.push(value);
  return parts.join(" ");
}

/** Share of the entries above which a word is "common": it re-orders the best candidates but does not select any. */
export const COMMON_SHARE = 0.003;
/** A word is never common while it is in fewer entries than this (small indexes rank on every word). */
export const COMMON_MIN = 500;

/**
 * A ranking structure built once per index generation. Words in at most {@link COMMON_SHARE} of the entries (and
 * never fewer than {@link COMMON_MIN}) select candidates through MiniSearch: exact, prefix from 3 letters for unknown
 * or rare words, fuzzy from 5 letters for words the index does not know. Common
 * words (say `typescript` in a TypeScript repository) only add a bonus to the best candidates. That keeps a match
 * over 100,000 entries to a few milliseconds, where scoring every entry that mentions a common word would not.
 */
export class IndexRanker {
  readonly #entries: readonly IndexEntry[];
  readonly #texts: string[];
  readonly #frequency = new Map<string, number>();
  readonly #commonAbove: number;
  readonly #search: MiniSearch<Doc>;

  /**
   * Builds the ranker at once, blocking the event loop (about a second per 10,000 entries); see {@link IndexRanker.build}.
   * @param options.commonShare overrides {@link COMMON_SHARE}.
   */
  constructor(entries: readonly IndexEntry[], options: { commonShare?: number; deferred?: boolean } = {}) {
    this.#entries = entries;
    this.#commonAbove = Math.max(COMMON_MIN, Math.ceil(entries.length * (options.commonShare ?? COMMON_SHARE)));
    this.#search = new MiniSearch<Doc>({ fields: ["text"], tokenize: (text) => text.split(" ").filter((t) => t !== ""), processTerm: (term) => term });
    this.#texts = [];
    if (options.deferred === true) return;
    for (let id = 0; id < entries.length; id++) this.#prepare(id);
    this.#search.addAll(this.#texts.map((text, id) => ({ id, text })));
  }

  /** Builds a ranker in slices, yielding to the event loop between them, so a role keeps answering meanwhile. */
  static async build(entries: readonly IndexEntry[], options: { commonShare?: number } = {}): Promise<IndexRanker> {
    const ranker = new IndexRanker(entries, { ...options, deferred: true });
    const slice = 2000;
    for (let from = 0; from < entries.length; from += slice) {
      for (let id = from; id < Math.min(entries.length, from + slice); id++) ranker.#prepare(id);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await ranker.#search.addAllAsync(ranker.#texts.map((text, id) => ({ id, text })), { chunkSize: slice });
    return ranker;
  }

  #prepare(id: number): void {
    const entry = this.#entries[id];
    const tokens = entry === undefined ? [] : toTokens(entry);
    for (const token of new Set(tokens)) this.#frequency.set(token, (this.#frequency.get(token) ?? 0) + 1);
    this.#texts[id] = ` ${tokens.join(" ")} `;
  }

  /** Number of entries ranked. */
  get size(): number {
    return this.#entries.length;
  }

  /** Ranks the entries for `query`, best first, scores in [0, 1]. */
  match(query: string, limit = DEFAULT_MATCH_LIMIT): FileMatch[] {
    const terms = [...new Set(words(query).filter((w) => !/^\d+$/.test(w)))];
    if (terms.length === 0 || this.#entries.length === 0) return [];
    const frequency = (term: string) => this.#frequency.get(term) ?? 0;
    const common = terms.filter((t) => frequency(t) > this.#commonAbove);
    const selective = terms.filter((t) => frequency(t) <= this.#commonAbove);
    const results = this.#search.search((selective.length > 0 ? selective : common).join(" "), {
      // Expanding a word already in many entries costs much and adds little: only unknown or rare words grow.
      prefix: (term) => term.length >= 3 && frequency(term) <= this.#commonAbove / 10,
      fuzzy: (term) => (term.length >= 5 && frequency(term) === 0 ? 0.2 : false),
      maxFuzzy: 2,
      combineWith: "OR",
    });
    const bonusTerms = selective.length > 0 ? common : [];
    const top = results[0]?.score ?? 1;
    const ranked = results.slice(0, Math.max(limit * 5, 100)).map((result) => {
      const id = result.id as number;
      const present = bonusTerms.filter((t) => this.#texts[id]?.includes(` ${t} `));
      const matched = [...new Set([...result.queryTerms, ...present])];
      return { id, matched, score: result.score + (0.2 * top * present.length) / Math.max(1, bonusTerms.length) };
    });
    ranked.sort((a, b) => b.score - a.score);
    const best = ranked[0]?.score ?? 1;
    return ranked.slice(0, limit).map(({ id, matched, score }) => {
      const entry = this.#entries[id];
      return {
        path: entry?.path ?? "",
        relevance: relevanceOf(entry?.metadata ?? "", matched),
        score: Math.round((0.5 * (score / best) + 0.5 * Math.min(1, matched.length / terms.length)) * 1000) / 1000,
      };
    });
  }
}

/** The words of an entry; numbers alone are left out (they make every file name unique and match nothing useful). */
function toTokens(entry: IndexEntry): string[] {
  const slash = entry.path.lastIndexOf("/");
  const name = words(entry.path.slice(slash + 1));
  const dirs = words(entry.path.slice(0, Math.max(0, slash)).split("/").slice(-4).join(" "));
  return [...name, ...name, ...dirs, ...words(entry.metadata)].filter((w) => !/^\d+$/.test(w));
}

function relevanceOf(metadata: string, matched: readonly string[]): string {
  const summary = metadata.length > 160 ? `${metadata.slice(0, 157)}...` : metadata;
  return `matched ${matched.join(", ")}: ${summary}`;
}
