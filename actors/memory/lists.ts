/**
 * The parts of the Memory ranking kept beside MiniSearch (see {@link IndexRanker}): sorted id lists of frequent
 * words, the words found in one entry only, and BM25 scoring from them, with MiniSearch's parameters.
 */
import SearchableMap from "minisearch/SearchableMap";

/** MiniSearch's BM25 parameters (its defaults). */
const BM25 = { k: 1.2, b: 0.7, d: 0.5 };
/** Common words an unknown query word may stand for (by prefix or typo), at most. */
const MAX_DERIVED = 8;
/** Words of one entry a query word may stand for by prefix or typo, at most. */
const MAX_SINGLES = 64;
/** MiniSearch's weights of prefix and fuzzy matches. */
const PREFIX_WEIGHT = 0.375;
const FUZZY_WEIGHT = 0.45;

/** A candidate entry while ranking. */
export interface Candidate {
  id: number;
  /** BM25 sum over the words matched (before the multiplication by their number). */
  raw: number;
  /** Query words matched. */
  matched: Set<string>;
  /** `raw` times the number of query words matched, as MiniSearch scores. */
  score: number;
}

/** A word of the id lists, with the query word it stands for and its weight. */
export interface ListedWord {
  source: string;
  weight: number;
}

/** Id lists, one-entry words and entry lengths of one index generation. */
export class WordLists {
  /** Distinct words per entry, for the length normalisation of BM25. */
  readonly #lengths: Uint16Array;
  #averageLength = 1;
  /** Listed word → ids of the entries holding it, ascending. */
  readonly #postings = new Map<string, Int32Array>();
  readonly #common = new SearchableMap<true>();
  /** Word found in one entry only → `id * 8 + min(occurrences, 7)`. */
  readonly #singles = new SearchableMap<number>();
  #scratch: Float64Array | undefined;
  #counts: Uint8Array | undefined;

  constructor(readonly size: number) {
    this.#lengths = new Uint16Array(size);
  }

  setLength(id: number, distinct: number): void {
    this.#lengths[id] = Math.min(65_535, distinct);
  }

  /** After every length is set. */
  settleLengths(): void {
    let total = 0;
    for (const length of this.#lengths) total += length;
    this.#averageLength = Math.max(1, total / Math.max(1, this.size));
  }

  /**
   * A list of `count` entries for `word`, to fill with ascending ids; a common word is also one an unknown word may
   * stand for.
   */
  allocate(word: string, count: number, common: boolean): Int32Array {
    const postings = new Int32Array(count);
    this.#postings.set(word, postings);
    if (common) this.#common.set(word, true);
    return postings;
  }

  /** The number of entries of a listed word, or `undefined`. */
  listed(word: string): number | undefined {
    return this.#postings.get(word)?.length;
  }

  /** Records a word found in entry `id` only, `occurrences` times. */
  addSingle(word: string, id: number, occurrences: number): void {
    this.#singles.set(word, id * 8 + Math.min(7, occurrences));
  }

  /** Whether entry `id` holds the listed word (binary search of its id list). */
  holds(word: string, id: number): boolean {
    const postings = this.#postings.get(word);
    if (postings === undefined) return false;
    let low = 0;
    let high = postings.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const at = postings[mid] ?? 0;
      if (at === id) return true;
      if (at < id) low = mid + 1;
      else high = mid - 1;
    }
    return false;
  }

  /** BM25 of a word in `entries` entries, `occurrences` times in entry `id`. */
  bm25(entries: number, id: number, occurrences = 1): number {
    const idf = Math.log(1 + (this.size - entries + 0.5) / (entries + 0.5));
    const length = this.#lengths[id] ?? 1;
    return idf * (BM25.d + (occurrences * (BM25.k + 1)) / (occurrences + BM25.k * (1 - BM25.b + (BM25.b * length) / this.#averageLength)));
  }

  /** The common words an unknown word may stand for: those it starts (from 3 letters) or misspells (from 5). */
  commonFor(term: string): string[] {
    if (term.length < 3 || this.#common.size === 0) return [];
    const found: string[] = [];
    for (const word of this.#common.atPrefix(term).keys()) {
      if (found.length >= MAX_DERIVED) return found;
      found.push(word);
    }
    if (term.length >= 5) {
      for (const word of this.#common.fuzzyGet(term, Math.min(2, Math.round(term.length * 0.2))).keys()) {
        if (found.length >= MAX_DERIVED) break;
        if (!found.includes(word)) found.push(word);
      }
    }
    return found;
  }

  /**
   * Scores the one-entry words `term` matches into `candidates`, as MiniSearch would: exactly, by prefix (from 3
   * letters, when `prefix`) and with typos (from 5 letters, when `fuzzy`), prefix and typo matches weighted down;
   * every score times `factor` (the weight of the field).
   */
  scoreSingles(term: string, options: { prefix: boolean; fuzzy: boolean }, candidates: Map<number, Candidate>, factor = 1): void {
    const hit = (value: number, weight: number) => {
      const id = Math.floor(value / 8);
      const candidate = candidates.get(id) ?? { id, raw: 0, matched: new Set<string>(), score: 0 };
      candidate.raw += factor * weight * this.bm25(1, id, value % 8);
      candidate.matched.add(term);
      candidates.set(id, candidate);
    };
    const exact = this.#singles.get(term);
    if (exact !== undefined) hit(exact, 1);
    const seen = new Set<string>([term]);
    if (options.prefix && term.length >= 3) {
      let n = 0;
      for (const [word, value] of this.#singles.atPrefix(term)) {
        if (seen.has(word)) continue;
        if (++n > MAX_SINGLES) break;
        seen.add(word);
        hit(value, (PREFIX_WEIGHT * word.length) / (word.length + 0.3 * (word.length - term.length)));
      }
    }
    if (options.fuzzy && term.length >= 5) {
      let n = 0;
      for (const [word, [value, distance]] of this.#singles.fuzzyGet(term, Math.min(2, Math.round(term.length * 0.2)))) {
        if (seen.has(word) || distance === 0) continue;
        if (++n > MAX_SINGLES) break;
        hit(value, (FUZZY_WEIGHT * word.length) / (word.length + distance));
      }
    }
  }

  /** Ranks from the id lists alone (a query of common words only), keeping the best `keep`. */
  rankListed(listed: ReadonlyMap<string, ListedWord>, keep: number): Candidate[] {
    if (listed.size === 0) return [];
    const raw = (this.#scratch ??= new Float64Array(this.size));
    const counts = (this.#counts ??= new Uint8Array(this.size));
    const touched: number[] = [];
    for (const [word, { weight }] of listed) {
      const postings = this.#postings.get(word);
      if (postings === undefined) continue;
      for (const id of postings) {
        if (counts[id] === 0) touched.push(id);
        counts[id] = Math.min(255, (counts[id] ?? 0) + 1);
        raw[id] = (raw[id] ?? 0) + weight * this.bm25(postings.length, id);
      }
    }
    const score = (id: number) => (raw[id] ?? 0) * (counts[id] ?? 0);
    // The best `keep`, kept sorted (descending) while scanning.
    const best: number[] = [];
    for (const id of touched) {
      const s = score(id);
      if (best.length === keep && s <= score(best[keep - 1] ?? 0)) continue;
      let at = best.length;
      while (at > 0 && score(best[at - 1] ?? 0) < s) at--;
      best.splice(at, 0, id);
      if (best.length > keep) best.pop();
    }
    const out = best.map((id) => {
      const matched = new Set<string>();
      for (const [word, { source }] of listed) if (this.holds(word, id)) matched.add(source);
      return { id, raw: raw[id] ?? 0, matched, score: score(id) };
    });
    for (const id of touched) {
      raw[id] = 0;
      counts[id] = 0;
    }
    return out;
  }
}
