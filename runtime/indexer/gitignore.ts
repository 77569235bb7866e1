/**
 * Glob patterns and `.gitignore` rules, as used by the indexer. The `.gitignore` subset: blank lines and `#`
 * comments, `\#` and `\!` escapes, trailing-space trimming, `!` negation, a trailing `/` for directories only, a
 * leading or inner `/` anchoring the pattern to the file's directory, `*`, `?`, `[...]` and `**`. The last matching
 * rule wins, deeper files after shallower ones, as in git.
 */
import { messageOf } from "../../protocol/errors.js";

/** A bad glob, naming it. */
export class GlobError extends Error {
  override name = "GlobError";
}

/** Translates a glob (`*`, `?`, `[...]`, `**`, `{a,b}`) into a regular-expression source matching whole paths. */
export function globSource(glob: string): string {
  let out = "";
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] ?? "";
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const atStart = i === 0 || glob[i - 1] === "/";
        const atEnd = i + 2 === glob.length || glob[i + 2] === "/";
        if (atStart && atEnd) {
          // `**/` matches zero or more directories; a final `**` matches everything below.
          if (i + 2 === glob.length) out += ".*";
          else out += "(?:.*/)?";
          i += 2;
          continue;
        }
      }
      out += "[^/]*";
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "[") {
      const close = glob.indexOf("]", i + 2);
      if (close < 0) throw new GlobError(`glob '${glob}': '[' at position ${i + 1} is never closed`);
      let set = glob.slice(i + 1, close);
      if (set.startsWith("!")) set = `^${set.slice(1)}`;
      out += `[${set.replace(/\\/g, "\\\\")}]`;
      i = close;
    } else if (c === "{") {
      braces++;
      out += "(?:";
    } else if (c === "}" && braces > 0) {
      braces--;
      out += ")";
    } else if (c === "," && braces > 0) {
      out += "|";
    } else if (c === "\\" && i + 1 < glob.length) {
      out += escape(glob[++i] ?? "");
    } else {
      out += escape(c);
    }
  }
  if (braces > 0) throw new GlobError(`glob '${glob}': '{' is never closed`);
  return out;
}

/** A compiled glob matching root-relative paths with `/` separators. A glob without `/` matches file names at any depth. */
export function compileGlob(glob: string): (relativePath: string) => boolean {
  if (glob.trim() === "") throw new GlobError("glob is empty");
  const anchored = glob.includes("/");
  const body = globSource(glob.replace(/^\//, ""));
  let regex: RegExp;
  try {
    regex = new RegExp(anchored ? `^${body}$` : `(?:^|/)${body}$`);
  } catch (err) {
    throw new GlobError(`glob '${glob}' is not valid: ${messageOf(err)}`);
  }
  return (path) => regex.test(path);
}

function escape(c: string): string {
  return /[.+^$(){}|[\]\\/]/.test(c) ? `\\${c}` : c;
}

interface Rule {
  negated: boolean;
  dirOnly: boolean;
  regex: RegExp;
}

/** The rules of one `.gitignore` file, relative to the directory holding it. */
export class IgnoreFile {
  readonly #rules: Rule[];

  constructor(text: string) {
    this.#rules = [];
    for (const raw of text.split(/\r?\n/)) {
      let line = raw.replace(/(?<!\\)\s+$/, "");
      if (line === "" || line.startsWith("#")) continue;
      const negated = line.startsWith("!");
      if (negated) line = line.slice(1);
      else if (line.startsWith("\\!") || line.startsWith("\\#")) line = line.slice(1);
      const dirOnly = line.endsWith("/");
      if (dirOnly) line = line.slice(0, -1);
      if (line === "") continue;
      const anchored = line.includes("/");
      try {
        const body = globSource(line.replace(/^\//, ""));
        this.#rules.push({ negated, dirOnly, regex: new RegExp(anchored ? `^${body}$` : `(?:^|/)${body}$`) });
      } catch {
        // git skips patterns it cannot parse; so do we.
      }
    }
  }

  /** `true` ignored, `false` re-included by a negation, `undefined` when no rule matches. */
  verdict(relativePath: string, isDir: boolean): boolean | undefined {
    let result: boolean | undefined;
    for (const rule of this.#rules) {
      if (rule.dirOnly && !isDir) continue;
      if (rule.regex.test(relativePath)) result = !rule.negated;
    }
    return result;
  }
}

/** The `.gitignore` files in force in one directory: its ancestors' (up to the walk's root) and its own. */
export class IgnoreStack {
  constructor(private readonly layers: readonly { dir: string; file: IgnoreFile }[] = []) {}

  /** This stack plus the `.gitignore` of `dir` (relative to the walk's root, `""` for the root). */
  with(dir: string, file: IgnoreFile): IgnoreStack {
    return new IgnoreStack([...this.layers, { dir, file }]);
  }

  /** Whether `relativePath` (from the walk's root) is ignored. */
  ignores(relativePath: string, isDir: boolean): boolean {
    let ignored = false;
    for (const { dir, file } of this.layers) {
      const local = dir === "" ? relativePath : relativePath.slice(dir.length + 1);
      const verdict = file.verdict(local, isDir);
      if (verdict !== undefined) ignored = verdict;
    }
    return ignored;
  }
}
