/**
 * The template library: task templates loaded from a directory (`--templates DIR`, default `templates/`),
 * validated at load (every error carries its file, line and column), registered by name and by
 * `type:subtype`, and matched against task descriptions and `<criteria>` (up to five scored candidates, atomic tasks only).
 *
 * @example
 * const { library, errors } = await loadLibrary("templates");
 * for (const e of errors) console.error(`${e.file}:${e.line ?? 1}:${e.col ?? 1}: ${e.message}`);
 * const [best] = library.match("judge the output against the criteria", { subtype: "evaluator" });
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { templatesOfFile, type LibraryError, type LibraryTemplate } from "./entries.js";
import { DEFAULT_MATCH_LIMIT, MIN_MATCH_SCORE, type MatchProfile, matchProfile, matchQuery, scoreTemplate } from "./match.js";
import { messageOf } from "../../protocol/errors.js";

export type { LibraryError, LibraryTemplate };

/** A candidate template for a query, with its score (Jaccard overlap in [0, 1], plus any hint boost). */
export interface TemplateMatch {
  template: LibraryTemplate;
  score: number;
}

/** How {@link TemplateLibrary.match} filters and limits. */
export interface MatchOptions {
  /** Only templates of this type. */
  type?: string;
  /** Only templates of this subtype. */
  subtype?: string;
  /** Template names or name parts (`template_hints`): their words join the query; a name boosts its template. */
  hints?: readonly string[];
  /** At most this many candidates (default 5). */
  limit?: number;
  /** Only atomic tasks (default true, unless `type` is given: then the type decides). */
  atomicOnly?: boolean;
}

/** Registered templates, looked up by name or `type:subtype`, and matched against task descriptions. */
export interface TemplateLibrary {
  /** Every template, in load order (files sorted by path, then document order). */
  readonly templates: readonly LibraryTemplate[];
  /** The template with this name. */
  get(name: string): LibraryTemplate | undefined;
  /**
   * Templates registered as `type:subtype`, in load order. Without `subtype`, every template of the type;
   * `byType("atomic:evaluator")` is `byType("atomic", "evaluator")`.
   */
  byType(type: string, subtype?: string): LibraryTemplate[];
  /**
   * Candidates for a task description, best first (ties in load order), scored by Jaccard word overlap between
   * the query plus hints and each template's description plus name; only scores above 0.1 count.
   */
  match(query: string, options?: MatchOptions): TemplateMatch[];
}

/** What a loader returns: the library of every valid template, and every problem found. */
export interface LoadedLibrary {
  library: TemplateLibrary;
  /** Files that do not parse, duplicate names, files that define nothing; each with its file, line and column. */
  errors: LibraryError[];
  /** Non-fatal findings of the parser (unsupported elements, …), located the same way. */
  warnings: LibraryError[];
}

/**
 * A library of these templates.
 * @throws {TypeError} when an entry is malformed or two share a name (the message names both files).
 */
export function createLibrary(templates: readonly LibraryTemplate[]): TemplateLibrary {
  if (!Array.isArray(templates)) throw new TypeError("createLibrary: templates must be an array");
  const byName = new Map<string, LibraryTemplate>();
  templates.forEach((t: unknown, i) => {
    checkTemplate(t, i);
    const earlier = byName.get(t.name);
    if (earlier) throw new TypeError(`duplicate template name '${t.name}': defined in ${earlier.file} and ${t.file}`);
    byName.set(t.name, t);
  });
  const list: readonly LibraryTemplate[] = Object.freeze([...templates]);
  const profiles: readonly MatchProfile[] = list.map((t) =>
    matchProfile(t.name, t.criteria === undefined ? t.description : `${t.description} ${t.criteria}`),
  );
  return {
    templates: list,
    get: (name) => (typeof name === "string" ? byName.get(name) : undefined),
    byType(type, subtype) {
      if (typeof type !== "string" || type === "") throw new TypeError("byType: type must be a non-empty string");
      if (subtype !== undefined && typeof subtype !== "string") throw new TypeError("byType: subtype must be a string");
      const colon = subtype === undefined ? type.indexOf(":") : -1;
      const [t, s] = colon >= 0 ? [type.slice(0, colon), type.slice(colon + 1) || undefined] : [type, subtype];
      return list.filter((entry) => entry.type === t && (s === undefined || entry.subtype === s));
    },
    match(query, options = {}) {
      const { type, subtype, hints = [], limit = DEFAULT_MATCH_LIMIT, atomicOnly = type === undefined } = checkMatch(query, options);
      const q = matchQuery(query, hints);
      const found: TemplateMatch[] = [];
      list.forEach((template, i) => {
        if (atomicOnly && template.type !== "atomic") return;
        if (type !== undefined && template.type !== type) return;
        if (subtype !== undefined && template.subtype !== subtype) return;
        const profile = profiles[i];
        const score = profile ? scoreTemplate(q, profile) : 0;
        if (score > MIN_MATCH_SCORE) found.push({ template, score });
      });
      // Array.prototype.sort is stable: equal scores keep load order.
      return found.sort((a, b) => b.score - a.score).slice(0, limit);
    },
  };
}

/**
 * The library of some template texts, validated. A file that does not parse is left out with an error carrying
 * its line and column; a name defined twice keeps the first definition and reports the second, naming both files.
 * @throws {TypeError} when `entries` is not a list of `{ file, xml }` strings.
 */
export function libraryFromXml(entries: readonly { file: string; xml: string }[]): LoadedLibrary {
  if (!Array.isArray(entries)) throw new TypeError("libraryFromXml: entries must be an array of { file, xml }");
  const errors: LibraryError[] = [];
  const warnings: LibraryError[] = [];
  const kept: LibraryTemplate[] = [];
  const seen = new Map<string, LibraryTemplate>();
  entries.forEach((entry: unknown, i) => {
    if (!isRecord(entry) || typeof entry.file !== "string" || typeof entry.xml !== "string") {
      throw new TypeError(`libraryFromXml: entry ${i} must be { file: string, xml: string }`);
    }
    const found = templatesOfFile(entry.file, entry.xml);
    errors.push(...found.errors);
    warnings.push(...found.warnings);
    for (const template of found.templates) {
      const first = seen.get(template.name);
      if (first) {
        const loc = template.document.entry?.loc;
        const firstAt = first.document.entry?.loc;
        errors.push({
          file: template.file,
          ...(loc ? { line: loc.line, col: loc.col } : {}),
          message: `duplicate template name '${template.name}': already defined in ${first.file}${firstAt ? `:${firstAt.line}:${firstAt.col}` : ""}`,
        });
        continue;
      }
      seen.set(template.name, template);
      kept.push(template);
    }
  });
  return { library: createLibrary(kept), errors, warnings };
}

/**
 * Loads every `*.xml` file below `dir` (recursively, in path order; hidden entries and symlinked directories are
 * skipped). `dir` may also name one `.xml` file. A missing directory gives an empty library, or, when
 * `required`, an error naming it.
 * @throws {TypeError} when `dir` is not a non-empty string.
 */
export async function loadLibrary(dir: string, options: { required?: boolean } = {}): Promise<LoadedLibrary> {
  if (typeof dir !== "string" || dir.trim() === "") throw new TypeError("loadLibrary: the templates directory must be a non-empty string");
  const empty = (error?: LibraryError): LoadedLibrary => ({ library: createLibrary([]), errors: error ? [error] : [], warnings: [] });
  let files: string[];
  try {
    const info = await stat(dir);
    if (info.isDirectory()) files = (await xmlFiles(dir, "")).sort(byPath).map((rel) => join(dir, rel));
    else if (info.isFile() && /\.xml$/i.test(dir)) files = [dir];
    else return empty({ file: dir, message: `templates directory '${dir}' is not a directory or an .xml file` });
  } catch (err) {
    if (code(err) === "ENOENT")
      return options.required ? empty({ file: dir, message: `templates directory '${dir}' does not exist` }) : empty();
    return empty({ file: dir, message: `cannot read templates directory '${dir}': ${reason(err)}` });
  }
  const entries: { file: string; xml: string }[] = [];
  const unreadable: LibraryError[] = [];
  for (const file of files) {
    try {
      entries.push({ file, xml: await readFile(file, "utf8") });
    } catch (err) {
      unreadable.push({ file, message: `cannot read: ${reason(err)}` });
    }
  }
  const loaded = libraryFromXml(entries);
  return { ...loaded, errors: [...unreadable, ...loaded.errors] };
}

async function xmlFiles(root: string, rel: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(join(root, rel), { withFileTypes: true })) {
    if (entry.name.startsWith(".")) continue;
    const path = rel === "" ? entry.name : join(rel, entry.name);
    if (entry.isDirectory()) found.push(...(await xmlFiles(root, path)));
    else if (/\.xml$/i.test(entry.name) && (entry.isFile() || (entry.isSymbolicLink() && (await isFile(join(root, path))))))
      found.push(path);
  }
  return found;
}

async function isFile(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}

function byPath(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function checkTemplate(t: unknown, i: number): asserts t is LibraryTemplate {
  const bad = (what: string) => new TypeError(`createLibrary: template ${i}: ${what}`);
  if (!isRecord(t)) throw bad("must be an object");
  if (typeof t.name !== "string" || t.name.trim() === "") throw bad("name must be a non-empty string");
  if (typeof t.type !== "string" || t.type === "") throw bad(`'${t.name}': type must be a non-empty string`);
  if (t.subtype !== undefined && typeof t.subtype !== "string") throw bad(`'${t.name}': subtype must be a string`);
  if (t.criteria !== undefined && typeof t.criteria !== "string") throw bad(`'${t.name}': criteria must be a string`);
  for (const key of ["description", "file", "xml"] as const)
    if (typeof t[key] !== "string") throw bad(`'${t.name}': ${key} must be a string`);
  if (!isRecord(t.document) || !Array.isArray(t.document.nodes)) throw bad(`'${t.name}': document must be a TemplateDocument`);
}

function checkMatch(query: unknown, options: unknown): MatchOptions {
  if (typeof query !== "string") throw new TypeError("match: query must be a string");
  if (!isRecord(options)) throw new TypeError("match: options must be an object");
  const { type, subtype, hints, limit, atomicOnly } = options;
  if (type !== undefined && typeof type !== "string") throw new TypeError("match: type must be a string");
  if (subtype !== undefined && typeof subtype !== "string") throw new TypeError("match: subtype must be a string");
  if (hints !== undefined && (!Array.isArray(hints) || hints.some((h) => typeof h !== "string")))
    throw new TypeError("match: hints must be an array of strings");
  if (limit !== undefined && (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1))
    throw new RangeError(`match: limit must be a positive integer, got '${String(limit)}'`);
  if (atomicOnly !== undefined && typeof atomicOnly !== "boolean") throw new TypeError("match: atomicOnly must be a boolean");
  return options as MatchOptions;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function code(err: unknown): string | undefined {
  return isRecord(err) && typeof err.code === "string" ? err.code : undefined;
}

function reason(err: unknown): string {
  return messageOf(err);
}
