/**
 * Token counting of one text in linear time and bounded memory, whatever the text: exact where that is cheap, an
 * upper bound where it is not, and never below the true count, so a context limit checked against it stays a hard
 * limit.
 *
 * How gpt-tokenizer (o200k_base, the encoding `tokens.ts` counts with) counts: a pre-tokenizer regex cuts the text
 * into pieces, and byte-pair encoding (BPE) merges bytes within each piece; merges never cross pieces. The regex is
 * linear in practice (measured on 1 MB adversarial inputs in test/unit/token-count.test.ts and the tokens bench), but
 * BPE of one piece is quadratic in its length: 64 KiB of one letter, one piece, took 10 s; 900 KB would take hours.
 *
 * The bound: BPE starts from one token per UTF-8 byte and every merge joins two tokens into one, so a piece of n
 * bytes has at most n tokens, and a text at most its UTF-8 length (special tokens are never recognised here: text is
 * counted as plain text, as the API tokenizes user content). That holds for any byte-level BPE, emoji and combining
 * sequences included (4 and 2–3 bytes per code point, all counted); unit tests check it against exact counts.
 *
 * So a text is counted:
 * - longer than {@link EXACT_COUNT_MAX_CHARS}: its UTF-8 length (no BPE at all: bounded CPU per text);
 * - else, when no piece is longer than {@link EXACT_PIECE_MAX_CHARS}: exactly (linear: each piece costs at most a
 *   constant);
 * - else: each long piece by its UTF-8 length, and each stretch of short pieces between them exactly, once the
 *   pre-tokenizer is shown to cut the stretch alone at the same places as within the whole text (so the stretch's
 *   count is the sum of its pieces' BPE); should it not, the stretch too by its UTF-8 length.
 */
import { createRequire } from "node:module";
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";

type Tokenizer = typeof import("gpt-tokenizer");
const requireHere = createRequire(import.meta.url);

/**
 * gpt-tokenizer's o200k encoder, loaded on first use: its tables take about half a second and 60 MB to load, which a
 * process that counts no tokens (every CLI command but those that run a Handler) should not pay. A Handler loads it as
 * it starts (`tokenCounter`), so that no session waits for it; later calls find it in `require`'s cache.
 */
export function loadTokenizer(): Tokenizer {
  return requireHere("gpt-tokenizer") as Tokenizer;
}

/** Texts longer than this (UTF-16 code units) are bounded by their UTF-8 length instead of counted. */
export const EXACT_COUNT_MAX_CHARS = 131_072;

/** Pre-tokenizer pieces longer than this (UTF-16 code units) are bounded by their UTF-8 length instead of encoded. */
export const EXACT_PIECE_MAX_CHARS = 256;

/** A token count of one text. */
export interface TextCount {
  /** The count, or an upper bound of it. */
  tokens: number;
  /** Whether `tokens` is the exact count (else it is an upper bound). */
  exact: boolean;
}

/** Counting as plain text: gpt-tokenizer otherwise throws on text holding e.g. `<|endoftext|>`. */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** The pre-tokenizer, and a second instance for checking stretches (both carry `lastIndex` state). */
const PIECES = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, "gu");
const RECUT = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, "gu");

/** The UTF-8 length of `text` (lone surrogates count 3 bytes, as the tokenizer encodes them as U+FFFD). */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** Counts `text` (or bounds it from above) in time linear in its length. */
export function countTextTokens(text: string): TextCount {
  if (text.length > EXACT_COUNT_MAX_CHARS) return { tokens: utf8Length(text), exact: false };
  if (text.length <= EXACT_PIECE_MAX_CHARS || !hasLongPiece(text)) return { tokens: exactCount(text), exact: true };
  return piecewise(text);
}

function exactCount(text: string): number {
  const { countTokens } = loadTokenizer();
  return text.includes("<|") ? countTokens(text, PLAIN_TEXT) : countTokens(text);
}

function hasLongPiece(text: string): boolean {
  PIECES.lastIndex = 0;
  let start = 0;
  // `test` with the g flag moves lastIndex to the match's end; every character starts some alternative, so the
  // matches are contiguous and never empty (were one to skip text, the skipped text counts toward the piece).
  while (start < text.length && PIECES.test(text)) {
    if (PIECES.lastIndex - start > EXACT_PIECE_MAX_CHARS) return true;
    start = PIECES.lastIndex;
  }
  return text.length - start > EXACT_PIECE_MAX_CHARS;
}

function piecewise(text: string): TextCount {
  let tokens = 0;
  let exact = true;
  let stretchStart = 0;
  const ends: number[] = [];
  const flush = (to: number) => {
    if (to === stretchStart) return;
    const stretch = text.slice(stretchStart, to);
    if (cutsAlike(stretch, stretchStart, ends)) tokens += exactCount(stretch);
    else {
      tokens += utf8Length(stretch);
      exact = false;
    }
    ends.length = 0;
  };
  PIECES.lastIndex = 0;
  let start = 0;
  while (start < text.length) {
    const end = PIECES.test(text) ? PIECES.lastIndex : text.length;
    if (end - start > EXACT_PIECE_MAX_CHARS) {
      flush(start);
      tokens += utf8Length(text.slice(start, end));
      exact = false;
      stretchStart = end;
    } else ends.push(end);
    start = end;
  }
  flush(text.length);
  return { tokens, exact };
}

/** Whether the pre-tokenizer cuts `stretch` alone at `ends` (offsets in the whole text, which starts it at `offset`). */
function cutsAlike(stretch: string, offset: number, ends: readonly number[]): boolean {
  RECUT.lastIndex = 0;
  for (const end of ends) {
    if (!RECUT.test(stretch) || RECUT.lastIndex !== end - offset) return false;
  }
  return RECUT.lastIndex === stretch.length;
}
