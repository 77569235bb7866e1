/**
 * The lexical environment of an evaluation (docs/task-language.md): frames of bindings chained outward.
 *
 * An {@link Env} is plain JSON (a frame and its `outer` frame), so machines can carry it in their context.
 * {@link find} walks outward to the frame that binds a path's first name, then resolves the rest of the path
 * (`a.b.c`, `results[1].name`, `list.0`) inside that value.
 */

/** One frame of bindings and the frame it extends. */
export interface Env {
  /** Names bound in this frame. */
  readonly bindings: Readonly<Record<string, unknown>>;
  /** The enclosing frame; absent for a root environment. */
  readonly outer?: Env;
}

/** What a lookup finds for a path. */
export type LookupResult = { readonly found: true; readonly value: unknown } | { readonly found: false };

const PATH = /^[A-Za-z_][\w-]*(?:\.\w[\w-]*|\[\d+\])*$/;
const SEGMENT = /([A-Za-z_][\w-]*|\w[\w-]*)|\[(\d+)\]/g;
const HEAD = /^[A-Za-z_][\w-]*/;

/** Whether `text` is a variable path (`name`, `a.b`, `results[1].name`). */
export function isPath(text: string): boolean {
  return PATH.test(text.trim());
}

/** A root environment holding `bindings` only. */
export function rootEnv(bindings: Readonly<Record<string, unknown>> = {}): Env {
  return { bindings: { ...bindings } };
}

/** A child environment: `bindings` shadow the names of `env`. */
export function extend(env: Env, bindings: Readonly<Record<string, unknown>>): Env {
  return { bindings: { ...bindings }, outer: env };
}

/**
 * Resolves `path` in the innermost frame that binds its first name (or the whole path as one key).
 * A frame that binds the name but not the rest of the path ends the search: outer frames are not consulted.
 *
 * @example
 * find(extend(rootEnv({ a: 1 }), { r: [{ n: "x" }] }), "r[0].n"); // → { found: true, value: "x" }
 */
export function find(env: Env, path: string): LookupResult {
  const trimmed = path.trim();
  const head = HEAD.exec(trimmed)?.[0];
  for (let frame: Env | undefined = env; frame; frame = frame.outer) {
    if (Object.hasOwn(frame.bindings, trimmed) || (head !== undefined && Object.hasOwn(frame.bindings, head))) {
      return resolvePath(frame.bindings, trimmed);
    }
  }
  return { found: false };
}

/** Every name visible in `env`, inner frames shadowing outer ones. */
export function flatten(env: Env): Record<string, unknown> {
  const chain: Env[] = [];
  for (let frame: Env | undefined = env; frame; frame = frame.outer) chain.unshift(frame);
  return Object.assign({}, ...chain.map((frame) => frame.bindings)) as Record<string, unknown>;
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
    const position =
      index !== undefined ? Number(index) : key !== undefined && Array.isArray(current) && /^\d+$/.test(key) ? Number(key) : undefined;
    if (position !== undefined) {
      if (!Array.isArray(current) || position >= current.length) return { found: false };
      current = current[position];
    } else if (
      key !== undefined &&
      typeof current === "object" &&
      current !== null &&
      !Array.isArray(current) &&
      Object.hasOwn(current, key)
    ) {
      current = Reflect.get(current, key);
    } else return { found: false };
  }
  return present(current);
}

function present(value: unknown): LookupResult {
  return value === undefined ? { found: false } : { found: true, value };
}
