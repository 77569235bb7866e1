/**
 * Ranking of index entries for associative matching: BM25 over two fields, each a MiniSearch full-text index with
 * words kept beside it (field.ts): the path and metadata of each entry, and its identifiers at a lower weight;
 * queried with prefix and fuzzy terms; words match by their Porter stems.
 */
import type { FileMatch, MatchRequest } from "../../protocol/index.js";
import { MAX_IDENTIFIERS_CHARS } from "../../protocol/index.js";
import type { IndexEntry } from "../../machines/memory/memory.js";
import { FieldIndex } from "./field.js";
import type { Candidate } from "./lists.js";
import { stem } from "./stem.js";
import { isNumber, parts, SPLIT, tails, words } from "./terms.js";
import { isSecondary, SECONDARY_QUERY, SECONDARY_WEIGHT } from "./prior.js";

export { camelParts, words } from "./terms.js";
export { POSTING_BUDGET } from "./field.js";

/** At most this many matches unless the caller asks otherwise. */
export const DEFAULT_MATCH_LIMIT = 20;

/** The words of a request that make up the query: the description, the free-text `taskText` of older callers and short string inputs. */
export function queryText(request: MatchRequest): string {
  const parts = [request.templateDescription, request.taskText ?? ""];
  for (const value of Object.values(request.inputs)) if (typeof value === "string" && value.length <= 200) parts.push(value);
  return parts.join(" ");
}

/** Share of the entries above which a word is "common": it is kept out of MiniSearch and never selects candidates alone. */
export const COMMON_SHARE = 0.003;
/** A word is never common while it is in fewer entries than this (small indexes rank on every word in MiniSearch). */
export const COMMON_MIN = 500;
/** Candidates scored with the words of id lists, at most. */
const MAX_POOL = 1000;
/**
 * Weight of the identifiers field against the path and metadata field. Chosen before it was measured, by a rule, not
 * on the retrieval queries: a file name counts twice, its description once, the names inside it half.
 */
export const IDENTIFIERS_WEIGHT = 0.5;

/** One ranked entry, before it becomes a {@link FileMatch}. */
export interface Ranked {
  entry: IndexEntry;
  /** Query words the entry matched (as typed; a prefix or a typo counts for the word it stands for). */
  matched: string[];
  /** Score in [0, 1]: half relative to the best entry, half the share of query words matched. */
  score: number;
}

/**
 * A ranking structure built once per index generation.
 *
 * The ranking is BM25 as MiniSearch computes it, over two fields: the words of each entry's path and metadata (file
 * name twice, last four directories, metadata), and, at {@link IDENTIFIERS_WEIGHT}, the words of its identifiers
 * (entries without them have none). An entry's score is the weighted sum over the fields and the matched query
 * words, times the number of query words matched. To keep a match over 100,000 entries to about a millisecond, and
 * the build to a few seconds, MiniSearch only does part of the work in each field (field.ts):
 * - Words in more than {@link COMMON_SHARE} of the entries (and more than {@link COMMON_MIN}), say `typescript` in
 *   a TypeScript repository, are "common": they are kept out of MiniSearch, in sorted lists of entry ids.
 * - Words found in one entry only (most compound names, such as `parsetemplate`) are kept out of MiniSearch too,
 *   in a radix tree of their own, searched the same way (exact, prefix, typos).
 * - MiniSearch selects and scores candidates from the query's rarest words, exact, prefix from 3 letters for
 *   unknown or rare words, fuzzy from 5 letters for words the index does not know, until the entries they are in
 *   add up to {@link POSTING_BUDGET}. The query's other words then add their BM25 share (term frequency one) to the
 *   candidates of both fields, from their id lists.
 * - An unknown word also stands for the common words it is a prefix or a typo of, with a lower weight.
 * - A query of common words only ranks the entries from the id lists alone.
 * Words are counted and matched by their Porter stems (a word as written is stemmed once per build), and tests,
 * fixtures and benchmarks score less unless the query asks for them (prior.ts).
 */
export class IndexRanker {
  readonly #entries: readonly IndexEntry[];
  /** The path and metadata of each entry; its identifiers. */
  readonly #main: FieldIndex;
  readonly #identifiers: FieldIndex;
  /** 1 for a test, fixture, mock or benchmark file (see prior.ts). */
  readonly #secondary: Uint8Array;

  /**
   * Builds the ranker at once, blocking the event loop (a few seconds per 100,000 entries); see {@link IndexRanker.build}.
   * @param options.commonShare overrides {@link COMMON_SHARE}.
   */
  constructor(entries: readonly IndexEntry[], options: { commonShare?: number; deferred?: boolean } = {}) {
    this.#entries = entries;
    const commonAbove = Math.max(COMMON_MIN, Math.ceil(entries.length * (options.commonShare ?? COMMON_SHARE)));
    this.#main = new FieldIndex(entries.length, commonAbove);
    this.#identifiers = new FieldIndex(entries.length, commonAbove);
    this.#secondary = new Uint8Array(entries.length);
    if (options.deferred === true) return;
    this.#count(0, entries.length);
    this.#classify();
    this.#add(0, entries.length);
    this.#finish();
  }

  /** Builds a ranker in slices, yielding to the event loop between them, so a role keeps answering meanwhile. */
  static async build(entries: readonly IndexEntry[], options: { commonShare?: number } = {}): Promise<IndexRanker> {
    const ranker = new IndexRanker(entries, { ...options, deferred: true });
    const slice = 2000;
    const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));
    for (let from = 0; from < entries.length; from += slice) {
      ranker.#count(from, Math.min(entries.length, from + slice));
      await yieldNow();
    }
    ranker.#classify();
    for (let from = 0; from < entries.length; from += slice) {
      ranker.#add(from, Math.min(entries.length, from + slice));
      await yieldNow();
    }
    ranker.#finish();
    return ranker;
  }

  /** First pass: the words of each entry in each field. */
  #count(from: number, to: number): void {
    for (let id = from; id < to; id++) {
      const entry = this.#entries[id];
      if (entry !== undefined && isSecondary(entry.path)) this.#secondary[id] = 1;
      this.#main.count(id, entry === undefined ? [] : toTokens(entry));
      this.#identifiers.count(id, entry === undefined ? [] : identifierTokens(entry));
    }
  }

  #classify(): void {
    this.#main.classify();
    this.#identifiers.classify();
  }

  #add(from: number, to: number): void {
    for (let id = from; id < to; id++) {
      this.#main.add(id);
      this.#identifiers.add(id);
    }
  }

  #finish(): void {
    this.#main.finish();
    this.#identifiers.finish();
  }

  /** Number of entries ranked. */
  get size(): number {
    return this.#entries.length;
  }

  /** Ranks the entries for `query`, best first, scores in [0, 1]. */
  match(query: string, limit = DEFAULT_MATCH_LIMIT): FileMatch[] {
    return this.rank(query, limit).map(toFileMatch);
  }

  /** Ranks the entries for `query`, best first, with the entries themselves (the model chooses among these). */
  rank(query: string, limit = DEFAULT_MATCH_LIMIT): Ranked[] {
    // Words are matched by their stems; `typed` names each stem by the query word it came from.
    const typed = new Map<string, string>();
    for (const word of words(query)) if (!isNumber(word) && !typed.has(stem(word))) typed.set(stem(word), word);
    const terms = [...typed.keys()];
    if (terms.length === 0 || this.#entries.length === 0 || limit < 1) return [];
    const fields: [FieldIndex, number][] = [[this.#main, 1]];
    if (!this.#identifiers.empty) fields.push([this.#identifiers, IDENTIFIERS_WEIGHT]);
    const plans = fields.map(([field, weight]) => ({ field, weight, ...field.plan(terms) }));
    const anyListed = plans.some((p) => p.listed.size > 0);
    // The words scored from id lists can lift any result, so all of them (within a bound) are candidates then.
    const keep = anyListed ? Math.max(limit * 5, MAX_POOL) : Math.max(limit * 5, 100);
    const pool = new Map<number, Candidate>();
    for (const { field, weight, searched } of plans) field.search(searched, keep, weight, pool);
    if (pool.size === 0)
      for (const { field, listed } of plans)
        for (const id of field.rankListed(listed, Math.max(limit, 20)))
          if (!pool.has(id)) pool.set(id, { id, raw: 0, matched: new Set<string>(), score: 0 });
    const candidates = [...pool.values()];
    for (const { field, weight, listed } of plans) field.scoreListed(listed, candidates, weight);
    const asksSecondary = terms.some((t) => SECONDARY_QUERY.has(t));
    for (const candidate of candidates) {
      candidate.score = candidate.raw * candidate.matched.size;
      if (!asksSecondary && this.#secondary[candidate.id] === 1) candidate.score *= SECONDARY_WEIGHT;
    }
    candidates.sort((a, b) => b.score - a.score);
    const best = candidates[0]?.score || 1;
    return candidates.slice(0, limit).flatMap(({ id, matched, score }) => {
      const entry = this.#entries[id];
      if (entry === undefined) return [];
      const share = Math.min(1, matched.size / terms.length);
      return [
        {
          entry,
          matched: [...matched].map((t) => typed.get(t) ?? t),
          score: Math.round((0.5 * (score / best) + 0.5 * share) * 1000) / 1000,
        },
      ];
    });
  }
}

/**
 * The words of an entry's identifiers, camelCase names as their parts (an entry written before them has none; a
 * longer field is cut).
 */
function identifierTokens(entry: IndexEntry): string[] {
  if (entry.identifiers === undefined || entry.identifiers === "") return [];
  return parts(entry.identifiers.slice(0, MAX_IDENTIFIERS_CHARS)).filter((w) => !isNumber(w));
}

/**
 * The words of an entry: the file name twice (a match there counts more) with the tails of its lower-case compounds,
 * its last four directories, the metadata.
 */
function toTokens(entry: IndexEntry): string[] {
  const slash = entry.path.lastIndexOf("/");
  const name = words(entry.path.slice(slash + 1));
  for (const token of entry.path.slice(slash + 1).split(SPLIT)) name.push(...tails(token));
  const dirs = words(entry.path.slice(0, Math.max(0, slash)).split("/").slice(-4).join(" "));
  const out: string[] = [];
  for (const list of [name, name, dirs, words(unlabelled(entry.metadata))]) for (const word of list) if (!isNumber(word)) out.push(word);
  return out;
}

/**
 * The indexer's metadata without its labels (`language:`, `exports:`, `defines:`, `sections:`, …), its size clause and its `name:`
 * clause (the file name is ranked from the path already): words every entry has only cost time.
 */
function unlabelled(metadata: string): string {
  return metadata
    .replace(/(^|;)\s*size:\s*[\d.]+\s*[KMG]?B\s*(?=;|$)/g, "$1")
    .replace(/(^|;)\s*name:[^;]*/g, "$1")
    .replace(/\b(?:language|exports|defines|sections|keys|tests|keywords):/g, " ");
}

/** A ranked entry as a match of the reply: `relevance` names the matched words and repeats the metadata. */
export function toFileMatch({ entry, matched, score }: Ranked): FileMatch {
  return { path: entry.path, relevance: relevanceOf(entry.metadata, matched), score };
}

function relevanceOf(metadata: string, matched: readonly string[]): string {
  const summary = metadata.length > 160 ? `${metadata.slice(0, 157)}...` : metadata;
  return `matched ${matched.join(", ")}: ${summary}`;
}
