/**
 * Workload 8: token counting of hostile text (`actors/handler/token-count.ts`): 1 MB of one letter, of one emoji, of one
 * letter under combining marks, and mixed; the Handler's count of a request holding a 900 KB description of one
 * character (the case: gpt-tokenizer alone spent minutes on it); and the costliest text still counted
 * exactly (random words up to the exact limit, every piece new to the tokenizer's cache). CPU ms per count
 * (`process.cpuUsage`, user + system), median over repeats, after a warm-up; each count on a fresh copy of the text.
 */
import { bench, describe } from "vitest";
import { countTextTokens, EXACT_COUNT_MAX_CHARS } from "../../actors/handler/token-count.js";
import { tokenCounter } from "../../actors/handler/tokens.js";

const countRequestTokens = tokenCounter();
import { figureOf, once, record, WHOLE } from "./results.js";

const REPEATS = 5;
const MB = 1 << 20;
/** The Handler must answer or fail the 900 KB task within a second of CPU; counting is a small part of that. */
const TARGET_MS = 1000;

/** CPU ms of `run` on each of `REPEATS` fresh texts from `make`, after one unrecorded run. */
function cpuMs(make: (round: number) => string, run: (text: string) => unknown): number[] {
  const once = (round: number) => {
    const text = make(round);
    const start = process.cpuUsage();
    run(text);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
  once(-1);
  return Array.from({ length: REPEATS }, (_, round) => once(round));
}

/** Random lower-case words of 16 letters, new every round (so the tokenizer's merge cache does not help). */
function randomWords(length: number, round: number): string {
  let seed = 1_000 + round;
  // mulberry32: integer-exact, so the words do not fall into a short cycle.
  const next = () => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  const letters: string[] = [];
  while (letters.length < length) letters.push(letters.length % 17 === 16 ? " " : String.fromCharCode(97 + (next() % 26)));
  return letters.join("");
}

const CASES: [string, (round: number) => string][] = [
  ["1 MB of one letter", (r) => "a".repeat(MB - 1) + String.fromCharCode(98 + (r & 7))],
  ["1 MB of one emoji", (r) => "😀".repeat(MB / 2 - 1) + String.fromCharCode(98 + (r & 7))],
  ["1 MB of combining marks on one letter", (r) => "e" + "\u0301".repeat(MB - 2) + String.fromCharCode(98 + (r & 7))],
  [
    "1 MB mixed (words, long runs, emoji, marks)",
    (r) => ("word ".repeat(50) + "z".repeat(5000) + "😀".repeat(100) + "\u0301".repeat(100)).repeat(MB / 5750) + r,
  ],
  [
    `${EXACT_COUNT_MAX_CHARS / 1024} Ki chars of random words (exact, the costliest exact count)`,
    (r) => randomWords(EXACT_COUNT_MAX_CHARS, r),
  ],
  [
    `${EXACT_COUNT_MAX_CHARS / 1024} Ki chars of 5,000-letter runs between words (exact stretches, bounded runs)`,
    (r) => `${r} ${"q".repeat(5000)} a b c `.repeat(EXACT_COUNT_MAX_CHARS / 5010),
  ],
];

describe("8 hostile input: token counting", () => {
  bench(
    "1 MB adversarial texts and the 900 KB request",
    once(() => {
      let order = 8.1;
      for (const [name, make] of CASES) {
        const figure = figureOf(cpuMs(make, (text) => countTextTokens(text)));
        record({
          order,
          workload: "8 hostile input: token counting",
          variant: `countTextTokens, ${name}`,
          unit: "ms CPU",
          figure,
          target: `≤ ${TARGET_MS} ms`,
          met: figure.max <= TARGET_MS,
        });
        order += 0.01;
      }
      const request = (round: number) => `<description>${"a".repeat(900_000 - round)}</description>`;
      const figure = figureOf(
        cpuMs(request, (content) =>
          countRequestTokens(
            "gpt-4o",
            [
              { role: "system", content: "You are a worker." },
              { role: "user", content },
            ],
            [],
          ),
        ),
      );
      record({
        order: 8.2,
        workload: "8 hostile input: token counting",
        variant: "Handler's count of a request with a 900 KB description of one character",
        unit: "ms CPU",
        figure,
        target: `≤ ${TARGET_MS} ms`,
        met: figure.max <= TARGET_MS,
      });
    }),
    WHOLE,
  );
});
