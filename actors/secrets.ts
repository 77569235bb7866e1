/**
 * Masking of the secret values a process knows (the API key, the NATS password and token, …) in text that leaves
 * it: a program's output, a tool's answer, a task's result, a streamed answer piece by piece. Every occurrence is
 * replaced by `[redacted]`.
 */

/** What replaces a secret value. */
export const REDACTED = "[redacted]";

/** Secret values shorter than this are not looked for (they would mask ordinary words). */
export const MIN_SECRET_LENGTH = 6;

/** Replaces every occurrence of `secrets` in a string; the identity when there is none to look for. */
export type Masker = (text: string) => string;

/** The masker of a process that knows no secret: {@link maskDeep} with it returns the value without walking it. */
const NO_SECRETS: Masker = (text) => text;

/** The secrets looked for, longest first (so a secret containing another is masked whole). */
function wantedOf(secrets: readonly string[]): string[] {
  return [...new Set(secrets.filter((s) => s.length >= MIN_SECRET_LENGTH))].sort((a, b) => b.length - a.length);
}

/** One global pattern of the `wanted` secrets, in their order (at a position, the longest that matches wins). */
function patternOf(wanted: readonly string[]): RegExp {
  return new RegExp(wanted.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
}

/** A {@link Masker} of `secrets` (longest first, so a secret containing another is masked whole). */
export function createMasker(secrets: readonly string[]): Masker {
  const wanted = wantedOf(secrets);
  if (wanted.length === 0) return NO_SECRETS;
  const pattern = patternOf(wanted);
  return (text) => text.replace(pattern, REDACTED);
}

/**
 * Masks a text that arrives in pieces (a streamed answer, published a piece at a time as `model.delta` events), so
 * that a secret split across pieces is masked too. Each piece is sent on at once, but for its tail that could still
 * become a secret (a prefix of one), held back until the next piece decides it or the stream ends. What it returns,
 * joined, is exactly the masker's output for the whole text, whatever the split points.
 */
export interface StreamMasker {
  /** Takes the next piece; returns what can be sent now (possibly empty), masked. */
  push(piece: string): string;
  /** The stream ended: returns the tail held back, masked. */
  end(): string;
}

/** A {@link StreamMasker} of `secrets`, for one stream. */
export function createStreamMasker(secrets: readonly string[]): StreamMasker {
  const wanted = wantedOf(secrets);
  if (wanted.length === 0) return { push: (piece) => piece, end: () => "" };
  const pattern = patternOf(wanted);
  const longest = wanted[0]?.length ?? 0;
  /** The first position from `from` at which the rest of `text` is a proper prefix of a secret: still undecided. */
  const undecided = (text: string, from: number): number => {
    for (let i = Math.max(from, text.length - longest + 1); i < text.length; i++) {
      const rest = text.slice(i);
      if (wanted.some((s) => s.length > rest.length && s.startsWith(rest))) return i;
    }
    return text.length;
  };
  let held = "";
  return {
    push(piece) {
      const text = held + piece;
      let out = "";
      // A match that starts before the first undecided position is final (no longer secret can start there); the
      // text between matches up to that position holds none. From that position on, the next piece decides.
      for (let at = 0; ; ) {
        const hold = undecided(text, at);
        pattern.lastIndex = at;
        const match = pattern.exec(text);
        if (match === null || match.index >= hold) {
          held = text.slice(hold);
          return out + text.slice(at, hold);
        }
        out += text.slice(at, match.index) + REDACTED;
        at = match.index + match[0].length;
      }
    },
    end() {
      const tail = held.replace(pattern, REDACTED);
      held = "";
      return tail;
    },
  };
}

/** A copy of `value` with `mask` applied to every string in it (object keys included); the value itself when nothing changes. */
export function maskDeep<T>(value: T, mask: Masker): T {
  if (mask === NO_SECRETS) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return mask(v);
    if (Array.isArray(v)) {
      const out = v.map(walk);
      return out.every((x, i) => x === v[i]) ? v : out;
    }
    if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
      let changed = false;
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const key = mask(k);
        const masked = walk(x);
        if (key !== k || masked !== x) changed = true;
        out[key] = masked;
      }
      return changed ? out : v;
    }
    return v;
  };
  return walk(value) as T;
}
