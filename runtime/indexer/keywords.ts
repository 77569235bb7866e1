/**
 * Keywords of a file for its description: the words it uses most, counted by stem, without language keywords,
 * English function words and licence boilerplate.
 */
import { stem } from "../../actors/memory/stem.js";

/** Words never keywords: keywords of the usual languages, English function words, licence boilerplate. */
const NOISE: ReadonlySet<string> = new Set(
  (
    "the and for with that this from are was were will not but you your can has have had its into than then them they " +
    "their there which when what where who how all any also each more most other some such only own same very just " +
    "const let var function return require module exports export import default new typeof instanceof void delete " +
    "true false null undefined async await yield class extends super this static get set public private protected " +
    "readonly interface type enum declare namespace string number boolean object symbol any unknown never else while " +
    "break continue switch case throw try catch finally use strict def self none elif pass lambda package func struct " +
    "impl pub mut int char float double long short unsigned include http https www com org github html " +
    "opts args arg obj val vals tmp idx str len param params " +
    "copyright license licensed licence licenses apache warranty warranties conditions permissions limitations " +
    "distributed software spdx identifier reserved rights express implied authors"
  ).split(" "),
);

/** Whether a lower-case word is never a keyword (a keyword of the usual languages, a function word, licence boilerplate). */
export function isNoise(word: string): boolean {
  return NOISE.has(word);
}

/** The words of a text: letters and digits from 3 characters, camelCase split, lower-case, without digits. */
export function partsOf(text: string): string[] {
  const out: string[] = [];
  for (const match of text.matchAll(/[A-Za-z][A-Za-z0-9]{2,40}/g))
    for (const part of match[0].split(/(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|\d+/))
      if (part.length >= 3) out.push(part.toLowerCase());
  return out;
}

/**
 * The words a file uses more than once, most used first (ties by first use), without keywords of the usual
 * languages, English function words and licence words; counted by stem (`level` and `levels` are one word), each
 * named by the first form met.
 */
export function frequentWords(text: string): string[] {
  const counts = new Map<string, { word: string; n: number }>();
  for (const word of partsOf(text)) {
    if (NOISE.has(word)) continue;
    const root = stem(word);
    const seen = counts.get(root);
    if (seen) seen.n++;
    else counts.set(root, { word, n: 1 });
  }
  return [...counts.values()]
    .filter(({ n }) => n > 1)
    .sort((a, b) => b.n - a.n)
    .map(({ word }) => word);
}
