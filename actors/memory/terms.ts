/**
 * The words of the Memory ranking: text split into lower-case words (also at camelCase), stop words and bare
 * numbers left out, and the tails of compound file names.
 */

const STOPWORDS: ReadonlySet<string> = new Set(
  "a an and are as at be by for from has have in into is it its of on or that the this to was were will with what which who how all any can do does where when why".split(
    " ",
  ),
);
export const SPLIT = /[^\p{L}\p{N}]+/u;

/** Whether a lower-case word is a stop word of the query and of the entries (`the`, `where`, …). */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}
/** A word with an inner capital (`parseTemplate`, `XMLParser`): only those are split further. */
const INNER_CAPITAL = /[a-z0-9][A-Z]|[A-Z][A-Z][a-z]/;
const DIGITS = /^\d+$/;

function push(out: string[], word: string): void {
  const lower = word.toLowerCase();
  if (lower.length > 1 && !STOPWORDS.has(lower)) out.push(lower);
}

/**
 * Splits text into lower-case words; a camelCase word also yields its parts
 * (`parseTemplate` → `parsetemplate`, `parse`, `template`).
 */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const token of text.split(SPLIT)) {
    if (token.length < 2) continue;
    if (!INNER_CAPITAL.test(token)) {
      push(out, token);
      continue;
    }
    push(out, token);
    for (const part of camelParts(token)) push(out, part);
  }
  return out;
}

/**
 * Like {@link words}, but a camelCase word yields its parts only (`parseTemplate` → `parse`, `template`): the
 * identifiers of a file are mostly compound names found in that file only, and keeping each whole would cost the
 * build a word per name for little (the description keeps the names it lists whole).
 */
export function parts(text: string): string[] {
  const out: string[] = [];
  for (const token of text.split(SPLIT)) {
    if (token.length < 2) continue;
    if (!INNER_CAPITAL.test(token)) push(out, token);
    else for (const part of camelParts(token)) push(out, part);
  }
  return out;
}

/**
 * The parts of a camelCase token, split before an upper-case letter that follows a lower-case letter or digit
 * (`parseXml` → `parse`, `Xml`) and before the last of a run of upper-case letters followed by a lower-case one
 * (`HTMLParser` → `HTML`, `Parser`). A scan: /([A-Z]+)([A-Z][a-z])/g backtracks quadratically over a long run of
 * capitals (20,000 took 1.4 s).
 */
export function camelParts(token: string): string[] {
  const parts: string[] = [];
  let start = 0;
  for (let i = 1; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (!isUpper(c)) continue;
    const before = token.charCodeAt(i - 1);
    if (isLower(before) || isDigit(before) || (isUpper(before) && isLower(token.charCodeAt(i + 1)))) {
      parts.push(token.slice(start, i));
      start = i;
    }
  }
  parts.push(token.slice(start));
  return parts;
}

const isUpper = (c: number) => c >= 65 && c <= 90;
const isLower = (c: number) => c >= 97 && c <= 122;
const isDigit = (c: number) => c >= 48 && c <= 57;

/** Whether a word is a bare number (numbers make every file name unique and match nothing useful). */
export function isNumber(word: string): boolean {
  const c = word.charCodeAt(0);
  return c >= 48 && c <= 57 && DIGITS.test(word);
}

/**
 * The tails of a compound word of a file name written in lower case, from 5 letters after at least 3
 * (`multistream` gives `stream`, and `tistream`…): the query word `stream` then finds `multistream.js`.
 */
export function tails(token: string): string[] {
  if (token.length < 8 || token.length > 40 || !/^[a-z]+$/.test(token)) return [];
  const out: string[] = [];
  for (let at = 3; token.length - at >= 5; at++) out.push(token.slice(at));
  return out;
}
