/**
 * Makes a snapshot or event safe to publish as an inspection message: secrets are masked and large values cut,
 * so neither an API key nor a whole document ever leaves the process through the inspector.
 */
import { createMasker, MIN_SECRET_LENGTH, REDACTED } from "../../actors/secrets.js";

export { MIN_SECRET_LENGTH, REDACTED };

/**
 * Keys whose values are always masked: names ending in `key`/`keys` or `token` (`apiKey`, `OPENAI_API_KEY`,
 * `accessToken`), or naming a secret, password, authorization, credential or cookie. Token *counts* (`tokens`,
 * `promptTokens`, `maxTokens`, `tokenBudget`) stay visible.
 */
export const SECRET_KEY = /keys?$|token$|secret|passw|authoriz|credential|cookie/i;

/** Limits applied by {@link sanitize}. */
export interface SanitizeLimits {
  /** Longest string kept whole; longer ones are cut and end with `…(+N chars)`. Default 2000. */
  maxString: number;
  /** Most array items kept; the rest are replaced by one `…(+N items)` marker. Default 50. */
  maxArray: number;
  /** Deepest nesting kept; deeper values become `[depth limit]`. Default 8. */
  maxDepth: number;
}

/** The default {@link SanitizeLimits}. */
export const DEFAULT_LIMITS: SanitizeLimits = { maxString: 2000, maxArray: 50, maxDepth: 8 };

/** Options of {@link sanitize}: the limits, and the secret values to mask wherever they appear. */
export interface SanitizeOptions extends SanitizeLimits {
  /**
   * Secret values (the configured API key, NATS password, …): every occurrence inside a string (an input, an error
   * message, a prompt) or an object key is replaced by {@link REDACTED}. Values shorter than
   * {@link MIN_SECRET_LENGTH} are ignored.
   */
  secrets: readonly string[];
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…(+${text.length - max} chars)` : text;
}

/**
 * A JSON-safe copy of `value` for inspection: every property whose key matches {@link SECRET_KEY} is replaced by
 * {@link REDACTED} (whatever its value), every occurrence of a secret value of `options.secrets` inside a string is
 * replaced by it too, strings and arrays are truncated, cycles become `[circular]`, functions
 * and symbols become `[function]`/`[symbol]`, `Error`s become `{ name, message }`, and objects with a `toJSON`
 * (an XState snapshot, a `Date`) are sanitised through it. The input is never modified.
 *
 * @example
 * sanitize({ type: "config", apiKey: "sk-1" }) // → { type: "config", apiKey: "[redacted]" }
 * sanitize({ error: "401 for key sk-live-123" }, { secrets: ["sk-live-123"] }) // → { error: "401 for key [redacted]" }
 */
export function sanitize(value: unknown, options: Partial<SanitizeOptions> = {}): unknown {
  const { maxString, maxArray, maxDepth } = { ...DEFAULT_LIMITS, ...options };
  const mask = createMasker(options.secrets ?? []);
  const seen = new WeakSet<object>();
  // Masked before cutting, so that a cut never leaves part of a secret behind.
  const text = (s: string) => cut(mask(s), maxString);

  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return text(v);
    if (typeof v === "number") return Number.isFinite(v) ? v : String(v);
    if (typeof v === "boolean" || v === null || v === undefined) return v ?? null;
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "function") return "[function]";
    if (typeof v === "symbol") return "[symbol]";
    if (seen.has(v)) return "[circular]";
    if (depth >= maxDepth) return "[depth limit]";
    seen.add(v);
    try {
      if (v instanceof Error) return { name: v.name, message: text(v.message) };
      const toJSON: unknown = Reflect.get(v, "toJSON");
      if (typeof toJSON === "function") {
        const plain: unknown = Reflect.apply(toJSON, v, []);
        if (plain !== v) return walk(plain, depth);
      }
      if (Array.isArray(v)) {
        const kept = v.slice(0, maxArray).map((item) => walk(item, depth + 1));
        return v.length > maxArray ? [...kept, `…(+${v.length - maxArray} items)`] : kept;
      }
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(v)) out[mask(key)] = SECRET_KEY.test(key) ? REDACTED : walk(item, depth + 1);
      return out;
    } finally {
      // A value shared by two branches is not a cycle; only the current path counts.
      seen.delete(v);
    }
  };
  return walk(value, 0);
}
