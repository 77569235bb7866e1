/**
 * Masking of the secret values a process knows (the API key, the NATS password and token, …) in text that leaves
 * it: a program's output, a tool's answer, a task's result. Every occurrence is replaced by `[redacted]`.
 */

/** What replaces a secret value. */
export const REDACTED = "[redacted]";

/** Secret values shorter than this are not looked for (they would mask ordinary words). */
export const MIN_SECRET_LENGTH = 6;

/** Replaces every occurrence of `secrets` in a string; the identity when there is none to look for. */
export type Masker = (text: string) => string;

/** The masker of a process that knows no secret: {@link maskDeep} with it returns the value without walking it. */
const NO_SECRETS: Masker = (text) => text;

/** A {@link Masker} of `secrets` (longest first, so a secret containing another is masked whole). */
export function createMasker(secrets: readonly string[]): Masker {
  const wanted = [...new Set(secrets.filter((s) => s.length >= MIN_SECRET_LENGTH))].sort((a, b) => b.length - a.length);
  if (wanted.length === 0) return NO_SECRETS;
  const pattern = new RegExp(wanted.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
  return (text) => text.replace(pattern, REDACTED);
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
