/**
 * The identifiers of a file for its index entry: more of the file's own words than its one-line description can
 * hold, most telling first, at most {@link MAX_IDENTIFIERS} characters. Source files give the names they define
 * (functions, classes and methods at any depth, assigned properties, variables, object and interface keys), the
 * names they import and their name-like string literals (event names, option keys); Markdown gives every heading and
 * its inline code; JSON, YAML and TOML their keys. Words already in the description, stop words and language keywords
 * are left out. Every expression is linear on hostile text (a unit test feeds it 100,000-character runs).
 */
import { isStopword } from "../../actors/memory/terms.js";
import { FENCE, languageOf, markdownLines } from "./describe.js";
import { isNoise } from "./keywords.js";

/** Longest identifiers field the indexer writes, in characters (the schema accepts up to twice as much). */
export const MAX_IDENTIFIERS = 1000;
/** Statement keywords the method expression could take for a name (`if (x) {`). */
const KEYWORDS: ReadonlySet<string> = new Set("if for while switch catch with return function constructor do try else typeof".split(" "));
/** Longer words are not names (a hash, a minified line). */
const MAX_WORD = 40;

const NAME = "[A-Za-z_$][\\w$]*";
const JS: readonly RegExp[] = [
  // Functions and classes, at any depth.
  new RegExp(`\\b(?:function\\b\\*?[ \\t]*|class[ \\t]+)(${NAME})`, "g"),
  // Methods: an indented name, its parameters and an opening brace ending the line.
  new RegExp(
    `^[ \\t]+(?:(?:async|static|get|set|public|private|protected|readonly|override)[ \\t]+)*\\*?(${NAME})[ \\t]*\\([^()\\n]{0,200}\\)[ \\t]*(?::[^{\\n]{0,100})?\\{[ \\t]*$`,
    "gm",
  ),
  // Assigned properties (`pino.destination = …`, `this.level = …`).
  new RegExp(`\\.(${NAME})[ \\t]*=(?![=>])`, "g"),
  // Variables and constants, at any depth.
  new RegExp(`\\b(?:const|let|var)[ \\t]+(${NAME})`, "g"),
  // Keys of object literals and members of interfaces and types, one a line.
  new RegExp(`^[ \\t]*(?:readonly[ \\t]+)?(${NAME})\\??[ \\t]*:(?!:)`, "gm"),
  // Names imported or destructured from a module.
  /\bimport[ \t]+(?:type[ \t]+)?\{([^{}]{1,1000})\}/g,
  /\{([^{}]{1,1000})\}[ \t]*=[ \t]*require\(/g,
];
/** String literals that read as names: event names, option keys, channel names (`'level-change'`, `"pino_asJson"`). */
const LITERAL = /(['"`])([A-Za-z][\w$.-]{2,50})\1/g;
const PYTHON: readonly RegExp[] = [
  /^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)/gm,
  /^([A-Za-z_]\w*)[ \t]*(?::[^=\n]{0,100})?=/gm,
];
const DECLARED: readonly RegExp[] = [
  /\b(?:func|fn|struct|trait|enum|type|class|interface|impl|def|module|object|record)[ \t]+(?:\([^()\n]{0,100}\)[ \t]*)?([A-Za-z_]\w*)/g,
];
const KEYS: Record<string, readonly RegExp[]> = {
  JSON: [/"([A-Za-z_$@][^"\\\n]{0,60})"[ \t]*:/g],
  YAML: [/^[ \t]*(?:-[ \t]+)?([A-Za-z_][\w.-]{0,60})[ \t]*:/gm],
  TOML: [/^[ \t]*\[{1,2}([^\]\n]{1,60})\]/gm, /^[ \t]*([A-Za-z_][\w.-]{0,60})[ \t]*=/gm],
  Shell: [/^[ \t]*(?:function[ \t]+)?([A-Za-z_][\w-]*)[ \t]*\(\)/gm, /^[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)=/gm],
};

/**
 * The identifiers of a file, space-separated, at most {@link MAX_IDENTIFIERS} characters; empty when the language
 * is unknown or nothing is found. `description` is the file's description: its words are not repeated.
 */
export function identifiersOf(path: string, text: string, description = ""): string {
  const language = languageOf(path);
  const sources: Iterable<string>[] = [];
  if (language === "TypeScript" || language === "JavaScript") sources.push(...JS.map((r) => captures(text, r)), literals(text));
  else if (language === "Markdown") sources.push(markdownNames(text));
  else if (language === "Python") sources.push(...PYTHON.map((r) => captures(text, r)), literals(text));
  else if (language !== undefined && KEYS[language] !== undefined) sources.push(...(KEYS[language] ?? []).map((r) => captures(text, r)));
  else if (language !== undefined && language !== "Text") sources.push(...DECLARED.map((r) => captures(text, r)), literals(text));
  const seen = new Set(description.toLowerCase().split(WORD_BREAK));
  const out: string[] = [];
  let used = 0;
  for (const source of sources)
    for (const item of source)
      for (const word of item.split(WORD_BREAK)) {
        const lower = word.toLowerCase();
        if (word.length < 2 || word.length > MAX_WORD || seen.has(lower) || !/^[\p{L}_$]/u.test(word)) continue;
        if (isStopword(lower) || isNoise(lower) || KEYWORDS.has(lower)) continue;
        if (used + word.length + (out.length > 0 ? 1 : 0) > MAX_IDENTIFIERS) return out.join(" ");
        seen.add(lower);
        out.push(word);
        used += word.length + (out.length > 1 ? 1 : 0);
      }
  return out.join(" ");
}

/** Where an item is cut into words: anything but letters, digits, `_` and `$` (camelCase is kept whole). */
const WORD_BREAK = /[^\p{L}\p{N}_$]+/u;

/** Lines that are comments (`//`, `/*`, ` * `, `#`): their words are prose, not names ("this function must …"). */
const COMMENT = /^[ \t]*(?:\/\/|\/\*|\*|#(?![!#]))/;

/** The first capture of each match of `pattern` (a global expression) outside comment lines, lazily. */
function* captures(text: string, pattern: RegExp): Generator<string> {
  // The start of the line of each match, found by scanning forward once (matches come in order).
  let lineStart = 0;
  let nextBreak = text.indexOf("\n");
  for (const match of text.matchAll(pattern)) {
    if (match[1] === undefined) continue;
    while (nextBreak !== -1 && nextBreak < match.index) {
      lineStart = nextBreak + 1;
      nextBreak = text.indexOf("\n", lineStart);
    }
    if (!COMMENT.test(text.slice(lineStart, Math.min(lineStart + 200, text.length)))) yield match[1];
  }
}

/**
 * String literals that read as names. Made of words only (letters, joined by `-`, `_`, `.` or camelCase, each part
 * of two letters or more): a key, a token or a hash (digits, random capitals) is never one, so no secret a file holds
 * in a literal reaches the index.
 */
function* literals(text: string): Generator<string> {
  for (const match of text.matchAll(LITERAL)) {
    const value = match[2] ?? "";
    const parts = value.split(/[-_.]|(?<=[a-z])(?=[A-Z])/);
    if (parts.every((p) => /^[A-Za-z][a-z]+$/.test(p) || /^[A-Z]{2,12}$/.test(p))) yield value;
  }
}

/** Every heading of a Markdown file and its inline code, outside code fences. */
function* markdownNames(text: string): Generator<string> {
  const spans: string[] = [];
  for (const line of markdownLines(text)) {
    if (line === FENCE) continue;
    if (line.startsWith("#")) {
      const heading = /^#{1,6}[ \t]+(.*)$/.exec(line)?.[1];
      if (heading !== undefined) yield heading;
    }
    if (spans.length < 500) for (const match of line.matchAll(/`([^`]{1,80})`/g)) spans.push(match[1] ?? "");
  }
  // Headings first: they name what a document is about; its inline code then names what it uses.
  yield* spans;
}
