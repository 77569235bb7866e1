/**
 * One field of the Memory ranking (see {@link IndexRanker}): the words of every entry in that field, kept in
 * MiniSearch and beside it (id lists of frequent words, one-entry words), and BM25 scores from them. The ranking has
 * two fields: the path and metadata of each entry, and its identifiers (weighted lower).
 */
import MiniSearch from "minisearch";
import { WordLists, type Candidate, type ListedWord } from "./lists.js";
import { stem } from "./stem.js";

/** Words in more entries than this also get a list of entry ids, so they can score candidates without MiniSearch. */
export const LISTED_ABOVE = 32;
/**
 * Entry mentions MiniSearch scores per query, at most: the query's rarest words are searched until their entries add
 * up to this; its other words score the candidates found from their id lists.
 */
export const POSTING_BUDGET = 400;
/** Weight of a common word an unknown query word stands for. */
const DERIVED_WEIGHT = 0.4;

interface Doc {
  id: number;
  /** The entry's words in MiniSearch, in order, with repeats. */
  tokens: string[];
}

/** What a query does in one field: the words MiniSearch searches, and the words scored from id lists. */
export interface FieldPlan {
  searched: string[];
  listed: Map<string, ListedWord>;
}

/** The words of one field of every entry of a generation; built in passes (count, classify, add, finish). */
export class FieldIndex {
  readonly #commonAbove: number;
  readonly #search: MiniSearch<Doc>;
  readonly #lists: WordLists;
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
  /** Words counted in the whole field (0: the field is empty and nothing is searched). */
  #mentions = 0;

  constructor(size: number, commonAbove: number) {
    this.#commonAbove = commonAbove;
    this.#lists = new WordLists(size);
    this.#search = new MiniSearch<Doc>({
      fields: ["tokens"],
      // Documents carry their words already split: no string is joined or split again.
      stringifyField: (value: unknown) => value as string,
      tokenize: (value: string) => (typeof value === "string" ? value.split(" ") : (value as unknown as string[])),
      processTerm: (term) => term,
    });
  }

  /** Whether no entry has a word in this field. */
  get empty(): boolean {
    return this.#mentions === 0;
  }

  /** First pass: the words of entry `id`, as numbers, and how many entries hold each word. */
  count(id: number, tokens: readonly string[]): void {
    const numbers = new Int32Array(tokens.length);
    this.#mentions += tokens.length;
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
      const seen = this.#lastSeen;
      if (seen !== undefined && seen[n] !== id + 1) {
        seen[n] = id + 1;
        this.#df[n] = (this.#df[n] ?? 0) + 1;
        distinct++;
      }
    }
    this.#docs[id] = numbers;
    this.#lists.setLength(id, distinct);
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
  classify(): void {
    this.#lists.settleLengths();
    this.#filled = new Int32Array(this.#words.length);
    for (let n = 0; n < this.#words.length; n++) {
      const count = this.#df[n] ?? 0;
      if (count > LISTED_ABOVE) this.#postings[n] = this.#lists.allocate(this.#words[n] ?? "", count, count > this.#commonAbove);
    }
  }

  /** Second pass: listed words into their id lists, one-entry words apart, the others into MiniSearch. */
  add(id: number): void {
    if (this.empty) return;
    const filled = this.#filled ?? new Int32Array(0);
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

  /** Drops what only the build needs. */
  finish(): void {
    this.#docs = [];
    this.#postings = [];
    this.#filled = undefined;
    this.#lastSeen = undefined;
    this.#stems = undefined;
  }

  /** Entries holding the word (a stem). */
  frequency(term: string): number {
    const n = this.#ids.get(term);
    return n === undefined ? 0 : (this.#df[n] ?? 0);
  }

  /**
   * Which query words MiniSearch searches (the rarest, within the budget) and which score from their id lists; an
   * unknown word also stands for the common words it starts or misspells.
   */
  plan(terms: readonly string[]): FieldPlan {
    const searched: string[] = [];
    const listed = new Map<string, ListedWord>();
    if (this.empty) return { searched, listed };
    let used = 0;
    for (const term of [...terms].sort((a, b) => this.frequency(a) - this.frequency(b))) {
      const f = this.frequency(term);
      if (f <= LISTED_ABOVE || (f <= this.#commonAbove && (searched.length === 0 || used + f <= POSTING_BUDGET))) {
        searched.push(term);
        used += f;
      } else {
        listed.set(term, { source: term, weight: 1 });
      }
      if (f === 0)
        for (const word of this.#lists.commonFor(term)) if (!listed.has(word)) listed.set(word, { source: term, weight: DERIVED_WEIGHT });
    }
    return { searched, listed };
  }

  /**
   * Adds the entries MiniSearch and the one-entry words find for the searched words to `pool` (at most `keep` from
   * MiniSearch), their scores times `weight`.
   */
  search(searched: readonly string[], keep: number, weight: number, pool: Map<number, Candidate>): void {
    if (searched.length === 0) return;
    // Expanding a word already in many entries costs much and adds little: only unknown or rare words grow.
    const prefix = (term: string) => term.length >= 3 && this.frequency(term) <= LISTED_ABOVE;
    const fuzzy = (term: string) => term.length >= 5 && this.frequency(term) === 0;
    const results = this.#search.search(searched.join(" "), {
      prefix,
      fuzzy: (term) => (fuzzy(term) ? 0.2 : false),
      maxFuzzy: 2,
      combineWith: "OR",
    });
    for (const r of results.slice(0, keep)) {
      const id = r.id as number;
      const candidate = pool.get(id) ?? { id, raw: 0, matched: new Set<string>(), score: 0 };
      candidate.raw += (weight * r.score) / Math.max(1, r.queryTerms.length);
      for (const term of r.queryTerms) candidate.matched.add(term);
      pool.set(id, candidate);
    }
    for (const term of searched)
      if (this.frequency(term) <= LISTED_ABOVE) this.#lists.scoreSingles(term, { prefix: prefix(term), fuzzy: fuzzy(term) }, pool, weight);
  }

  /** Adds the BM25 share of the listed words each candidate holds, times `weight`. */
  scoreListed(listed: ReadonlyMap<string, ListedWord>, candidates: Iterable<Candidate>, weight: number): void {
    if (listed.size === 0) return;
    for (const candidate of candidates) {
      for (const [word, { source, weight: own }] of listed) {
        if (!this.#lists.holds(word, candidate.id)) continue;
        candidate.raw += weight * own * this.#lists.bm25(this.#lists.listed(word) ?? 1, candidate.id);
        candidate.matched.add(source);
      }
    }
  }

  /** The ids of the best `keep` entries from the id lists alone (a query of common words only). */
  rankListed(listed: ReadonlyMap<string, ListedWord>, keep: number): number[] {
    return this.#lists.rankListed(listed, keep).map((c) => c.id);
  }
}
