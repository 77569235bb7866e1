/**
 * Token counting on hostile text: results are exact where the text is small and plain, never below the exact count
 * anywhere (checked on inputs small enough to count exactly), finite and positive. The 1 MB cases finish at all
 * only because nothing quadratic runs on them (gpt-tokenizer alone takes hours on 900 KB of one letter).
 */
import { countTokens } from "gpt-tokenizer";
import { describe, expect, it } from "vitest";
import { countTextTokens, EXACT_COUNT_MAX_CHARS, EXACT_PIECE_MAX_CHARS, utf8Length } from "../../actors/handler/token-count.js";
import { tokenCounter } from "../../actors/handler/tokens.js";

const countRequestTokens = tokenCounter();

const MB = 1 << 20;
/** The exact count of gpt-tokenizer (o200k_base), as plain text. */
const truth = (text: string) => countTokens(text, { disallowedSpecial: new Set() });

/** Small texts of every kind the bound must hold for: letters, emoji (with ZWJ and skin tones), combining marks, CJK, scripts, control bytes. */
const SAMPLES = [
  "hello world",
  "a".repeat(3000),
  "A".repeat(2000) + "!",
  " ".repeat(2000) + "x",
  "\n" + " ".repeat(1500) + "\n\n",
  "😀".repeat(700),
  "👩‍👩‍👧‍👦👍🏽".repeat(200),
  "e" + "\u0301".repeat(1500),
  "Z" + "\u0336\u0337\u0338\u0489".repeat(400),
  "漢字かなカナ한국어".repeat(200),
  "ภาษาไทยไม่มีช่องว่าง".repeat(100),
  "!" + "\n/".repeat(800),
  "\u0000\u0001\u007f\ufffd\ud800x\udfff",
  "a's".repeat(900),
  "aA1".repeat(900),
  "say <|endoftext|> and <|fim_prefix|> as text",
];

describe("countTextTokens", () => {
  it("is never below the exact count, and exact when it says so", () => {
    for (const text of SAMPLES) {
      const counted = countTextTokens(text);
      const exact = truth(text);
      expect(counted.tokens, JSON.stringify(text.slice(0, 20))).toBeGreaterThanOrEqual(exact);
      if (counted.exact) expect(counted.tokens).toBe(exact);
    }
  });

  it("bounds every text by its UTF-8 length, emoji and combining sequences included", () => {
    for (const text of SAMPLES) expect(truth(text)).toBeLessThanOrEqual(utf8Length(text));
    // Random code points of every plane, surrogate halves alone included.
    let seed = 7;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    for (let round = 0; round < 50; round++) {
      const text = Array.from({ length: 300 }, () => String.fromCodePoint(next() % 0x110000)).join("");
      expect(truth(text)).toBeLessThanOrEqual(utf8Length(text));
    }
  });

  it("counts plain text exactly, special-token spellings as text", () => {
    expect(countTextTokens("hello world")).toEqual({ tokens: truth("hello world"), exact: true });
    const special = "say <|endoftext|> as text";
    expect(countTextTokens(special)).toEqual({ tokens: truth(special), exact: true });
  });

  it("counts short stretches exactly and bounds long pieces by their bytes", () => {
    const long = "x".repeat(EXACT_PIECE_MAX_CHARS * 4);
    const prose = "The quick brown fox jumps over the lazy dog.\n";
    const text = `${prose.repeat(20)}${long}\n${prose.repeat(20)}`;
    const counted = countTextTokens(text);
    expect(counted.exact).toBe(false);
    expect(counted.tokens).toBeGreaterThanOrEqual(truth(text));
    // Tight apart from the long piece: its bytes replace its own count.
    expect(counted.tokens).toBeLessThanOrEqual(truth(text) - truth(long) + long.length + 2);
  });

  it("bounds texts over the exact limit by their UTF-8 length", () => {
    const text = "word ".repeat(EXACT_COUNT_MAX_CHARS / 5 + 1);
    expect(countTextTokens(text)).toEqual({ tokens: utf8Length(text), exact: false });
  });

  it.each([
    ["1 MB of one letter", "a".repeat(MB)],
    ["1 MB of one upper-case letter", "A".repeat(MB)],
    ["1 MB of one emoji", "😀".repeat(MB / 2)],
    ["1 MB of combining marks on one letter", "e" + "\u0301".repeat(MB - 1)],
    ["1 MB of spaces", " ".repeat(MB)],
    ["1 MB of punctuation and newlines", "!" + "\n/".repeat(MB / 2)],
    ["1 MB mixed", ("word ".repeat(50) + "z".repeat(5000) + "😀".repeat(100) + "\u0301".repeat(100)).repeat(MB / 5750)],
    ["120 K of one letter (under the exact limit)", "a".repeat(120_000)],
    ["120 K of long runs between words (under the exact limit)", ("q".repeat(5000) + " a b c ").repeat(23)],
  ])("gives a finite positive bound for %s", (_name, text) => {
    const counted = countTextTokens(text);
    expect(Number.isFinite(counted.tokens)).toBe(true);
    expect(counted.tokens).toBeGreaterThan(0);
    expect(counted.tokens).toBeLessThanOrEqual(utf8Length(text));
    expect(counted.exact).toBe(false);
  });
});

describe("countRequestTokens", () => {
  it("counts a request holding 900 KB of one character with a bound over the context window", () => {
    const messages = [
      { role: "system" as const, content: "You are a worker." },
      { role: "user" as const, content: `<description>${"a".repeat(900_000)}</description>` },
    ];
    const counted = countRequestTokens("gpt-4o", messages, []);
    expect(counted.exact).toBe(false);
    expect(counted.tokens).toBeGreaterThan(900_000);
  });

  it("stays exact for a known model and plain messages, and counts many long texts of one length", () => {
    expect(countRequestTokens("gpt-4o", [{ role: "user", content: "hi" }], []).exact).toBe(true);
    // Texts past the Map-key limit of one length: kept one by one, never in a degenerate Map.
    const base = "lorem ipsum ".repeat(1500);
    for (let i = 0; i < 200; i++) {
      const counted = countRequestTokens("gpt-4o", [{ role: "user", content: `${base}${String(i).padStart(3, "0")}` }], []);
      expect(counted.tokens).toBeGreaterThan(3000);
    }
  });
});
