/**
 * Ranking of index entries for associative matching: a MiniSearch full-text index over each file's name, its
 * directories and its metadata, queried with prefix and fuzzy terms; words match by their Porter stems.
 */
import MiniSearch from "minisearch";
import type { FileMatch, MatchRequest } from "../../protocol/index.js";
import type { IndexEntry } from "../../machines/memory/memory.js";
import { WordLists, type Candidate, type ListedWord } from "./lists.js";
import { stem } from "./stem.js";
import { isNumber, SPLIT, tails, words } from "./terms.js";
import { isSecondary, SECONDARY_QUERY, SECONDARY_WEIGHT } from "./prior.js";

export { camelParts, words } from "./terms.js";

/** At most this many matches unless the caller asks otherwise. */
export const DEFAULT_MATCH_LIMIT = 20;

/** The words of a request that make up the query: the description, the seed-era text and short string inputs. */
export function queryText(request: MatchRequest): string {
  const parts = [request.templateDescription, request.taskText ?? ""];
  for (const value of Object.values(request.inputs)) if (typeof value === "string" && value.length <= 200) parts.push(value);
  return parts.join(" ");
}

/** Share of the entries above which a word is "common": it is kept out of MiniSearch and never selects candidates alone. */
export const COMMON_SHARE = 0.003;
/** A word is never common while it is in fewer entries than this (small indexes rank on every word in MiniSearch). */
export const COMMON_MIN = 500;
/** Words in more entries than this also get a list of entry ids, so they can score candidates without MiniSearch. */
const LISTED_ABOVE = 32;
/**
 * Entry mentions MiniSearch scores per query, at most: the query's rarest words are searched until their entries add
 * up to this; its other words score the candidates found from their id lists.
 */
export const POSTING_BUDGET = 400;
/** Candidates scored with the words of id lists, at most. */
const MAX_POOL = 1000;
/** Weight of a common word an unknown query word stands for. */
const DERIVED_WEIGHT = 0.4;

/** One ranked entry, before it becomes a {@link FileMatch}. */
export interface Ranked {
  entry: IndexEntry;
  /** Query words the entry matched (as typed; a prefix or a typo counts for the word it stands for). */
  matched: string[];
  /** Score in [0, 1]: half relative to the best entry, half the share of query words matched. */
  score: number;
}

interface Doc {
  id: number;
  /** The entry's words in MiniSearch, in order, with repeats (the file name is there twice). */
  tokens: string[];
}

/**
 * A ranking structure built once per index generation.
 *
 * The ranking is BM25 over the words of each entry (file name twice, last four directories, metadata), as MiniSearch
 * computes it: the sum over matched query words, times the number of query words matched. To keep a match over
 * 100,000 entries to about a millisecond, and the build to a few seconds, MiniSearch only does part of the work:
 * - Words in more than {@link COMMON_SHARE} of the entries (and more than {@link COMMON_MIN}), say `typescript` in
 *   a TypeScript repository, are "common": they are kept out of MiniSearch, in sorted lists of entry ids.
 * - Words found in one entry only (most compound names, such as `parsetemplate`) are kept out of MiniSearch too,
 *   in a radix tree of their own, searched the same way (exact, prefix, typos).
 * - MiniSearch selects and scores candidates from the query's rarest words, exact, prefix from 3 letters for
 *   unknown or rare words, fuzzy from 5 letters for words the index does not know, until the entries they are in
 *   add up to {@link POSTING_BUDGET}. The query's other words then add their BM25 share (term frequency one) to the
 *   candidates, from their id lists.
 * - An unknown word also stands for the common words it is a prefix or a typo of, with a lower weight.
 * - A query of common words only ranks the entries from the id lists alone.
 * Words are counted and matched by their Porter stems (a word as written is stemmed once per build), and tests,
 * fixtures and benchmarks score less unless the query asks for them (prior.ts).
 */
export class IndexRanker {
  readonly #entries: readonly IndexEntry[];
  readonly #commonAbove: number;
  readonly #search: MiniSearch<Doc>;
  readonly #lists: WordLists;
  /** 1 for a test, fixture, mock or benchmark file (see prior.ts). */
  readonly #secondary: Uint8Array;
  /** Word → its number; number → word; number → entries holding the word. */
  readonly #ids = new Map<string, number>();
  readonly #words: string[] = [];
  /** Build only: word as written → the number of its stem (each distinct word is stemmed once). */
  #stems: Map<string, number> | undefined = new Map();
  #df = new Int32Array(4096);
  /** Build only: the entry (plus one) that last counted each word; each entry's words, as numbers; id lists. */
  #lastSeen: Int32Array | undefined = new Int32Array(4096);
  #docs: (Int32Array | undefined)[] = [];
  #postings: (Int32Array | undefined)[] = [];
  #filled: Int32Array | undefined;

  /**
   * Builds the ranker at once, blocking the event loop (a few seconds per 100,000 entries); see {@link IndexRanker.build}.
   * @param options.commonShare overrides {@link COMMON_SHARE}.
   */
  constructor(entries: readonly IndexEntry[], options: { commonShare?: number; deferred?: boolean } = {}) {
    this.#entries = entries;
    this.#commonAbove = Math.max(COMMON_MIN, Math.ceil(entries.length * (options.commonShare ?? COMMON_SHARE)));
    this.#lists = new WordLists(entries.length);
    this.#secondary = new Uint8Array(entries.length);
    this.#search = new MiniSearch<Doc>({
      fields: ["tokens"],
      // Documents carry their words already split: no string is joined or split again.
      stringifyField: (value: unknown) => value as string,
      tokenize: (value: string) => (typeof value === "string" ? value.split(" ") : (value as unknown as string[])),
      processTerm: (term) => term,
    });
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

  /** First pass: the words of each entry, as numbers, and how many entries hold each word. */
  #count(from: number, to: number): void {
    const lastSeen = this.#lastSeen ?? new Int32Array(0);
    for (let id = from; id < to; id++) {
      const entry = this.#entries[id];
      const tokens = entry === undefined ? [] : toTokens(entry);
      if (entry !== undefined && isSecondary(entry.path)) this.#secondary[id] = 1;
      const numbers = new Int32Array(tokens.length);
      let distinct = 0;
      for (let i = 0; i < tokens.length; i++) {
        const token = tokens[i] ?? "";
        let n = this.#stems?.get(token);
        if (n === undefined) {
          const root = stem(token);
          n = this.#ids.get(root);
          if (n === undefined) {
            n = this.#words.length;
            this.#ids.set(root, n);
            this.#words.push(root);
            if (n >= this.#df.length) this.#grow();
          }
          this.#stems?.set(token, n);
        }
        numbers[i] = n;
        const seen = this.#lastSeen ?? lastSeen;
        if (seen[n] !== id + 1) {
          seen[n] = id + 1;
          this.#df[n] = (this.#df[n] ?? 0) + 1;
          distinct++;
        }
      }
      this.#docs[id] = numbers;
      this.#lists.setLength(id, distinct);
    }
  }

  #grow(): void {
    const df = new Int32Array(this.#df.length * 2);
    df.set(this.#df);
    this.#df = df;
    const seen = new Int32Array(df.length);
    if (this.#lastSeen) seen.set(this.#lastSeen);
    this.#lastSeen = seen;
  }

  /** Between the passes: which words are common, which get id lists. */
  #classify(): void {
    this.#lists.settleLengths();
    this.#filled = new Int32Array(this.#words.length);
    for (let n = 0; n < this.#words.length; n++) {
      const count = this.#df[n] ?? 0;
      if (count > LISTED_ABOVE) this.#postings[n] = this.#lists.allocate(this.#words[n] ?? "", count, count > this.#commonAbove);
    }
  }

  /** Second pass: listed words into their id lists, one-entry words apart, the others into MiniSearch. */
  #add(from: number, to: number): void {
    const filled = this.#filled ?? new Int32Array(0);
    for (let id = from; id < to; id++) {
      const numbers = this.#docs[id] ?? new Int32Array(0);
      const kept: string[] = [];
      let singles: number[] | undefined;
      for (const n of numbers) {
        const count = this.#df[n] ?? 0;
        if (count === 1) (singles ??= []).push(n);
        else if (count <= LISTED_ABOVE) kept.push(this.#words[n] ?? "");
        else {
          const postings = this.#postings[n];
          const at = filled[n] ?? 0;
          // A word repeated in one entry is listed once.
          if (postings !== undefined && (at === 0 || postings[at - 1] !== id)) {
            postings[at] = id;
            filled[n] = at + 1;
          }
          if (count <= this.#commonAbove) kept.push(this.#words[n] ?? "");
        }
      }
      if (singles) for (const n of new Set(singles)) this.#lists.addSingle(this.#words[n] ?? "", id, singles.filter((m) => m === n).length);
      this.#search.add({ id, tokens: kept });
      this.#docs[id] = undefined;
    }
  }

  /** Drops what only the build needs. */
  #finish(): void {
    this.#docs = [];
    this.#postings = [];
    this.#filled = undefined;
    this.#lastSeen = undefined;
    this.#stems = undefined;
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
    const frequency = (term: string) => {
      const n = this.#ids.get(term);
      return n === undefined ? 0 : (this.#df[n] ?? 0);
    };
    // MiniSearch searches the rarest words within the budget; the other listed words score from their id lists.
    const searched: string[] = [];
    const listed = new Map<string, ListedWord>();
    let used = 0;
    for (const term of [...terms].sort((a, b) => frequency(a) - frequency(b))) {
      const f = frequency(term);
      if (f <= LISTED_ABOVE || (f <= this.#commonAbove && (searched.length === 0 || used + f <= POSTING_BUDGET))) {
        searched.push(term);
        used += f;
      } else {
        listed.set(term, { source: term, weight: 1 });
      }
      if (f === 0)
        for (const word of this.#lists.commonFor(term)) if (!listed.has(word)) listed.set(word, { source: term, weight: DERIVED_WEIGHT });
    }
    // Expanding a word already in many entries costs much and adds little: only unknown or rare words grow.
    const prefix = (term: string) => term.length >= 3 && frequency(term) <= LISTED_ABOVE;
    const fuzzy = (term: string) => term.length >= 5 && frequency(term) === 0;
    const pool = new Map<number, Candidate>();
    if (searched.length > 0) {
      const results = this.#search.search(searched.join(" "), {
        prefix,
        fuzzy: (term) => (fuzzy(term) ? 0.2 : false),
        maxFuzzy: 2,
        combineWith: "OR",
      });
      // The words scored from id lists can lift any result, so all of them (within a bound) are candidates then.
      for (const r of results.slice(0, listed.size > 0 ? Math.max(limit * 5, MAX_POOL) : Math.max(limit * 5, 100))) {
        const id = r.id as number;
        pool.set(id, { id, raw: r.score / Math.max(1, r.queryTerms.length), matched: new Set(r.queryTerms), score: 0 });
      }
      for (const term of searched)
        if (frequency(term) <= LISTED_ABOVE) this.#lists.scoreSingles(term, { prefix: prefix(term), fuzzy: fuzzy(term) }, pool);
    }
    let candidates = [...pool.values()];
    for (const candidate of candidates) {
      for (const [word, { source, weight }] of listed) {
        if (!this.#lists.holds(word, candidate.id)) continue;
        candidate.raw += weight * this.#lists.bm25(this.#lists.listed(word) ?? 1, candidate.id);
        candidate.matched.add(source);
      }
      candidate.score = candidate.raw * candidate.matched.size;
    }
    if (candidates.length === 0) candidates = this.#lists.rankListed(listed, Math.max(limit, 20));
    if (!terms.some((t) => SECONDARY_QUERY.has(t)))
      for (const candidate of candidates) if (this.#secondary[candidate.id] === 1) candidate.score *= SECONDARY_WEIGHT;
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
