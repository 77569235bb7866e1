/**
 * Template matching (docs/task-language.md): which registered template handles a task description? Jaccard overlap of
 * word sets, with hints (`template_hints`) as a boost. Pure and
 * deterministic: no I/O, no randomness, ties keep registration order.
 */

/** Scores at or below this are not a match: one word shared among ten or more says nothing about which template fits. */
export const MIN_MATCH_SCORE = 0.1;
/** Candidates returned unless the caller asks otherwise: the five docs/task-language.md promises. */
export const DEFAULT_MATCH_LIMIT = 5;
/** Added when a hint is exactly a template's name (case-insensitive). */
export const EXACT_HINT_BOOST = 0.5;
/** Added when a hint (3 characters or more) appears inside a template's name. */
export const PARTIAL_HINT_BOOST = 0.25;

/** Words too common to say anything about which template fits. */
const STOPWORDS: ReadonlySet<string> = new Set(
  "a an and are as at be by for from has have in into is it its of on or that the this to was were will with".split(" "),
);

/**
 * The distinct words of a text: lower-cased, apostrophes dropped (`don't` → `dont`), every other character that is
 * not a letter or digit a separator (`director_output` → `director`, `output`), stopwords left out.
 *
 * @example
 * wordSet("Summarize the {{text}}!") // Set { "summarize", "text" }
 */
export function wordSet(text: string): Set<string> {
  const words = new Set<string>();
  for (const word of text
    .toLowerCase()
    .replace(/['’]/g, "")
    .split(/[^\p{L}\p{N}]+/u)) {
    if (word !== "" && !STOPWORDS.has(word)) words.add(word);
  }
  return words;
}

/** |a ∩ b| / |a ∪ b|; 0 when both are empty. */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 0;
  let shared = 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const word of small) if (large.has(word)) shared++;
  return shared / (a.size + b.size - shared);
}

/** What a template contributes to matching, computed once when the library is built. */
export interface MatchProfile {
  /** Words of the description and the name. */
  readonly words: ReadonlySet<string>;
  /** The name, lower-cased. */
  readonly name: string;
}

/** The profile of a template with this name and description. */
export function matchProfile(name: string, description: string): MatchProfile {
  return { words: wordSet(`${description} ${name}`), name: name.toLowerCase() };
}

/** What a query contributes, computed once per match call. */
export interface MatchQuery {
  /** Words of the query and the hints. */
  readonly words: ReadonlySet<string>;
  /** Hints, trimmed and lower-cased, empty ones dropped. */
  readonly hints: readonly string[];
}

/** The query of a description and its hints. */
export function matchQuery(query: string, hints: readonly string[] = []): MatchQuery {
  const cleaned = hints.map((h) => h.trim().toLowerCase()).filter((h) => h !== "");
  return { words: wordSet([query, ...cleaned].join(" ")), hints: cleaned };
}

/**
 * The score of one template for a query: the Jaccard overlap of their words, plus {@link EXACT_HINT_BOOST} when a
 * hint names the template exactly, or else {@link PARTIAL_HINT_BOOST} when a hint appears in its name.
 */
export function scoreTemplate(query: MatchQuery, profile: MatchProfile): number {
  let boost = 0;
  for (const hint of query.hints) {
    if (hint === profile.name) boost = Math.max(boost, EXACT_HINT_BOOST);
    else if (hint.length >= 3 && profile.name.includes(hint)) boost = Math.max(boost, PARTIAL_HINT_BOOST);
  }
  return jaccard(query.words, profile.words) + boost;
}
