/**
 * `{{var}}` substitution (SEED-NOTES §3.3, C13, C14): the Evaluator's only templating step, run on
 * prompt-bearing fields before a Handler sees them. Values are inserted once and never re-scanned.
 */

/** What a lookup finds for a placeholder path. */
export type LookupResult = { readonly found: true; readonly value: unknown } | { readonly found: false };

/** Resolves a placeholder path (`name`, `a.b.c`, `results[1].name`). */
export type Lookup = (path: string) => LookupResult;

/** `strict`: any unresolved variable fails the substitution; `lenient`: it becomes `{{undefined:name}}`. */
export type SubstituteMode = "strict" | "lenient";

/** Outcome of {@link substitute}. */
export type SubstituteResult =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; /** Every unresolved path, once each, in order of appearance. */ readonly missing: string[] };

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
const PATH = /^[A-Za-z_][\w-]*(?:\.\w[\w-]*|\[\d+\])*$/;
const SEGMENT = /([A-Za-z_][\w-]*|\w[\w-]*)|\[(\d+)\]/g;

/**
 * Replace every `{{path}}` in `text` with the looked-up value: strings as they are, anything else
 * as JSON. Placeholders that are not variable paths are left untouched: inline calls such as
 * `{{f(a, "b")}}` (evaluated elsewhere), `{{undefined:name}}` markers, and other brace text.
 *
 * @example
 * substitute("Hi {{user.name}}", (p) => resolvePath({ user: { name: "Ada" } }, p), "strict");
 * // → { ok: true, text: "Hi Ada" }
 */
export function substitute(text: string, lookup: Lookup, mode: SubstituteMode): SubstituteResult {
  const missing: string[] = [];
  const out = text.replace(PLACEHOLDER, (match, inner: string) => {
    const path = inner.trim();
    if (!PATH.test(path)) return match;
    const result = lookup(path);
    if (result.found) return stringify(result.value);
    if (!missing.includes(path)) missing.push(path);
    return `{{undefined:${path}}}`;
  });
  if (mode === "strict" && missing.length > 0) return { ok: false, missing };
  return { ok: true, text: out };
}

/**
 * Resolve a dotted/indexed path against bindings: `name`, `a.b.c`, `results[1].name`, `list.0`.
 * Only own properties are visible (never `constructor` or other prototype members); indexing needs
 * an array and an in-range index. A binding whose key is the whole path (e.g. `"a.b"`) wins.
 */
export function resolvePath(bindings: Readonly<Record<string, unknown>>, path: string): LookupResult {
  const trimmed = path.trim();
  if (Object.hasOwn(bindings, trimmed)) return present(bindings[trimmed]);
  if (!PATH.test(trimmed)) return { found: false };
  let current: unknown = bindings;
  for (const [, key, index] of trimmed.matchAll(SEGMENT)) {
    if (index !== undefined) {
      if (!Array.isArray(current)) return { found: false };
      const position = Number(index);
      if (position >= current.length) return { found: false };
      current = current[position];
    } else if (key !== undefined) {
      if (Array.isArray(current) && /^\d+$/.test(key)) {
        const position = Number(key);
        if (position >= current.length) return { found: false };
        current = current[position];
      } else if (typeof current === "object" && current !== null && Object.hasOwn(current, key)) {
        current = Reflect.get(current, key);
      } else return { found: false };
    }
  }
  return present(current);
}

function present(value: unknown): LookupResult {
  return value === undefined ? { found: false } : { found: true, value };
}

function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return json;
  } catch {
    // BigInt or a cycle: fall through to String().
  }
  return String(value);
}
