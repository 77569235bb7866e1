/**
 * The Porter stemmer (M.F. Porter, "An algorithm for suffix stripping", 1980), for the Memory ranking: a query word
 * and a word of the index match when their stems do (`rounding` and `round`, `retries` and `retry`, `computation`
 * and `computed`). Words that are not plain lower-case ASCII letters, shorter than 3 or longer than 40 letters are
 * kept as they are (the expressions below are linear only on short words).
 */

const C = "[^aeiou][^aeiouy]*";
const V = "[aeiouy][aeiou]*";
/** The measure m of the stem is above 0, exactly 1, above 1; the stem holds a vowel. */
const M_ABOVE_0 = new RegExp(`^(${C})?${V}${C}`);
const M_IS_1 = new RegExp(`^(${C})?${V}${C}(${V})?$`);
const M_ABOVE_1 = new RegExp(`^(${C})?${V}${C}${V}${C}`);
const HAS_VOWEL = new RegExp(`^(${C})?[aeiouy]`);
/** Consonant, vowel, consonant other than w, x or y, at the end of a stem of measure 1 (`*o`). */
const CVC = new RegExp(`^${C}[aeiouy][^aeiouwxy]$`);

const STEP2: Readonly<Record<string, string>> = {
  ational: "ate",
  tional: "tion",
  enci: "ence",
  anci: "ance",
  izer: "ize",
  bli: "ble",
  alli: "al",
  entli: "ent",
  eli: "e",
  ousli: "ous",
  ization: "ize",
  ation: "ate",
  ator: "ate",
  alism: "al",
  iveness: "ive",
  fulness: "ful",
  ousness: "ous",
  aliti: "al",
  iviti: "ive",
  biliti: "ble",
  logi: "log",
};
const STEP3: Readonly<Record<string, string>> = { icate: "ic", ative: "", alize: "al", iciti: "ic", ical: "ic", ful: "", ness: "" };
const STEP2_SUFFIX =
  /^(.+?)(ational|tional|enci|anci|izer|bli|alli|entli|eli|ousli|ization|ation|ator|alism|iveness|fulness|ousness|aliti|iviti|biliti|logi)$/;
const STEP3_SUFFIX = /^(.+?)(icate|ative|alize|iciti|ical|ful|ness)$/;
const STEP4_SUFFIX = /^(.+?)(al|ance|ence|er|ic|able|ible|ant|ement|ment|ent|ou|ism|ate|iti|ous|ive|ize)$/;
const PLAIN = /^[a-z]{3,40}$/;

/** The Porter stem of a lower-case word. */
export function stem(word: string): string {
  if (!PLAIN.test(word)) return word;
  // A leading y is a consonant: upper-case keeps the vowel classes from reading it as a vowel.
  let w = word.startsWith("y") ? `Y${word.slice(1)}` : word;
  let match: RegExpExecArray | null;

  // Step 1a: plurals.
  if ((match = /^(.+?)(ss|i)es$/.exec(w))) w = `${match[1]}${match[2]}`;
  else if ((match = /^(.+?)([^s])s$/.exec(w))) w = `${match[1]}${match[2]}`;

  // Step 1b: -eed, -ed, -ing.
  if ((match = /^(.+?)eed$/.exec(w))) {
    if (M_ABOVE_0.test(match[1] ?? "")) w = w.slice(0, -1);
  } else if ((match = /^(.+?)(ed|ing)$/.exec(w))) {
    const base = match[1] ?? "";
    if (HAS_VOWEL.test(base)) {
      w = base;
      if (/(at|bl|iz)$/.test(w)) w += "e";
      else if (/([^aeiouylsz])\1$/.test(w)) w = w.slice(0, -1);
      else if (CVC.test(w)) w += "e";
    }
  }

  // Step 1c: y to i.
  if ((match = /^(.+?)y$/.exec(w)) && HAS_VOWEL.test(match[1] ?? "")) w = `${match[1]}i`;

  // Steps 2 and 3: double and single suffixes.
  if ((match = STEP2_SUFFIX.exec(w)) && M_ABOVE_0.test(match[1] ?? "")) w = `${match[1]}${STEP2[match[2] ?? ""] ?? ""}`;
  if ((match = STEP3_SUFFIX.exec(w)) && M_ABOVE_0.test(match[1] ?? "")) w = `${match[1]}${STEP3[match[2] ?? ""] ?? ""}`;

  // Step 4: -ant, -ence, -ment, … on long stems.
  if ((match = STEP4_SUFFIX.exec(w))) {
    if (M_ABOVE_1.test(match[1] ?? "")) w = match[1] ?? w;
  } else if ((match = /^(.+?)(s|t)(ion)$/.exec(w))) {
    const base = `${match[1]}${match[2]}`;
    if (M_ABOVE_1.test(base)) w = base;
  }

  // Step 5: a final -e, a final double l.
  if ((match = /^(.+?)e$/.exec(w))) {
    const base = match[1] ?? "";
    if (M_ABOVE_1.test(base) || (M_IS_1.test(base) && !CVC.test(base))) w = base;
  }
  if (/ll$/.test(w) && M_ABOVE_1.test(w)) w = w.slice(0, -1);

  return w.startsWith("Y") ? `y${w.slice(1)}` : w;
}
