/**
 * Makes a snapshot or event safe to publish as an inspection message: secrets are masked and large values cut,
 * so neither an API key nor a whole document ever leaves the process through the inspector.
 */

/** Keys whose values are always masked. */
export const SECRET_KEY = /key|token|secret|password|authorization/i;

/** What replaces a masked value. */
export const REDACTED = "[redacted]";

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

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…(+${text.length - max} chars)` : text;
}

/**
 * A JSON-safe copy of `value` for inspection: every property whose key matches {@link SECRET_KEY} is replaced by
 * {@link REDACTED} (whatever its value), strings and arrays are truncated, cycles become `[circular]`, functions
 * and symbols become `[function]`/`[symbol]`, `Error`s become `{ name, message }`, and objects with a `toJSON`
 * (an XState snapshot, a `Date`) are sanitised through it. The input is never modified.
 *
 * @example
 * sanitize({ type: "config", apiKey: "sk-1" }) // → { type: "config", apiKey: "[redacted]" }
 */
export function sanitize(value: unknown, limits: Partial<SanitizeLimits> = {}): unknown {
  const { maxString, maxArray, maxDepth } = { ...DEFAULT_LIMITS, ...limits };
  const seen = new WeakSet<object>();

  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return cut(v, maxString);
    if (typeof v === "number") return Number.isFinite(v) ? v : String(v);
    if (typeof v === "boolean" || v === null || v === undefined) return v ?? null;
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "function") return "[function]";
    if (typeof v === "symbol") return "[symbol]";
    if (seen.has(v)) return "[circular]";
    if (depth >= maxDepth) return "[depth limit]";
    seen.add(v);
    try {
      if (v instanceof Error) return { name: v.name, message: cut(v.message, maxString) };
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
      for (const [key, item] of Object.entries(v)) out[key] = SECRET_KEY.test(key) ? REDACTED : walk(item, depth + 1);
      return out;
    } finally {
      // A value shared by two branches is not a cycle; only the current path counts.
      seen.delete(v);
    }
  };
  return walk(value, 0);
}
