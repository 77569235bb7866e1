/**
 * Free-text metadata of one file for the index: its language (by extension), its size, and a short description
 * taken from the text (first Markdown heading, leading comment or docstring, exported or defined names).
 */
import { basename, extname } from "node:path";
import { stem } from "../../actors/memory/stem.js";
import { frequentWords, partsOf } from "./keywords.js";

const LANGUAGES: Record<string, string> = {
  ".ts": "TypeScript",
  ".tsx": "TypeScript",
  ".mts": "TypeScript",
  ".cts": "TypeScript",
  ".js": "JavaScript",
  ".jsx": "JavaScript",
  ".mjs": "JavaScript",
  ".cjs": "JavaScript",
  ".py": "Python",
  ".md": "Markdown",
  ".markdown": "Markdown",
  ".json": "JSON",
  ".yaml": "YAML",
  ".yml": "YAML",
  ".toml": "TOML",
  ".xml": "XML",
  ".html": "HTML",
  ".css": "CSS",
  ".sh": "Shell",
  ".bash": "Shell",
  ".go": "Go",
  ".rs": "Rust",
  ".java": "Java",
  ".kt": "Kotlin",
  ".c": "C",
  ".h": "C",
  ".cc": "C++",
  ".cpp": "C++",
  ".hpp": "C++",
  ".rb": "Ruby",
  ".php": "PHP",
  ".cs": "C#",
  ".swift": "Swift",
  ".sql": "SQL",
  ".txt": "Text",
  ".conf": "Config",
  ".ini": "Config",
};
const NAMES: Record<string, string> = { Dockerfile: "Dockerfile", Makefile: "Makefile", LICENSE: "Text", README: "Text" };

/** Extensions never read: their contents are binary. */
export const BINARY_EXTENSIONS: ReadonlySet<string> = new Set(
  ".png .jpg .jpeg .gif .webp .ico .pdf .zip .gz .tgz .bz2 .xz .7z .tar .jar .class .so .dylib .dll .exe .o .a .wasm .woff .woff2 .ttf .otf .mp3 .mp4 .mov .avi .bin .sqlite .db .pyc".split(
    " ",
  ),
);

/** The language of a file by its name, or `undefined`. */
export function languageOf(path: string): string | undefined {
  return LANGUAGES[extname(path).toLowerCase()] ?? NAMES[basename(path)];
}

/** Whether bytes read from the start of a file look binary (a NUL byte, as git decides). */
export function looksBinary(head: Uint8Array): boolean {
  return head.includes(0);
}

const MAX_DESCRIPTION = 240;
const MAX_NAMES = 12;
/** Lead sentences and first paragraphs are cut to this, so the names after them still fit. */
const MAX_LEAD = 140;
/** Other top-level names of a source file, at most (exported names come first, and frequent words after them). */
const MAX_DEFINED = 12;

/**
 * A short description from the start of a file's text, at most 240 characters; empty when nothing useful is found.
 * It carries the file's own words, most telling first: a Markdown file's first heading, its first paragraph and its
 * other headings; a source file's leading comment (a licence header is passed over), its exported names and its
 * other top-level names.
 */
export function describe(path: string, text: string): string {
  const language = languageOf(path);
  const parts: string[] = [];
  if (language === "Markdown") {
    const { headings, paragraph } = markdownOutline(text);
    if (headings[0] !== undefined) parts.push(headings[0]);
    if (paragraph !== undefined) parts.push(sentences(paragraph));
    if (headings.length > 1) parts.push(`sections: ${headings.slice(1).join(", ")}`);
  } else if (language === "Python") {
    // Comment lines and blanks before the docstring; not `^\s*(?:#.*\n|\s)*`, which backtracks quadratically on blanks.
    const doc = /^(?:[ \t\r\n]*#[^\n]*\n)*[ \t\r\n]*[rRuU]?("""|''')([\s\S]*?)\1/.exec(text)?.[2];
    const lead = doc ?? leadingComment(text, "#");
    if (lead) parts.push(firstSentence(lead));
    const names = [...text.matchAll(/^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)/gm)].map((m) => m[1] ?? "");
    if (names.length > 0) parts.push(`defines: ${list(names)}`);
  } else if (language === "TypeScript" || language === "JavaScript") {
    const lead = codeLead(text);
    if (lead) parts.push(sentences(lead));
    const exported = exportedNames(text);
    if (exported.length > 0) parts.push(`exports: ${list(exported)}`);
    const defined = topLevelNames(text).filter((n) => !exported.includes(n));
    if (defined.length > 0) parts.push(`defines: ${list(defined, MAX_DEFINED)}`);
    const tests = [...text.matchAll(/^\s*(?:test|it|describe|suite)(?:\.\w+)?\(\s*(["'`])([^"'`\n]{1,100})\1/gm)].map((m) => m[2] ?? "");
    if (tests.length > 0) parts.push(`tests: ${list(tests)}`);
  } else if (language === "Go" || language === "Rust" || language === "Java" || language === "C" || language === "C++") {
    const lead = codeLead(text);
    if (lead) parts.push(sentences(lead));
    const names = [...text.matchAll(/^(?:pub\s+)?(?:func|fn|struct|trait|type|class|interface)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)/gm)].map(
      (m) => m[1] ?? "",
    );
    if (names.length > 0) parts.push(`defines: ${list(names)}`);
  } else if (language === "JSON") {
    parts.push(...jsonOutline(text));
  } else {
    const lead = leadingComment(text.replace(/^#!.*\n/, ""), "#") ?? blockComment(text);
    if (lead) parts.push(firstSentence(lead));
    else {
      const first = text.split("\n").find((l) => l.trim() !== "");
      if (first) parts.push(first.trim());
    }
  }
  const kept = parts.filter((p) => p !== "");
  // The rest of the room goes to the words the file uses most, beyond those already there.
  const room = MAX_DESCRIPTION - kept.join("; ").length - "; keywords: ".length;
  if (room >= 12 && language !== undefined && language !== "JSON") {
    const known = new Set(partsOf(kept.join(" ")).map(stem));
    const top: string[] = [];
    let used = 0;
    for (const word of frequentWords(text)) {
      if (known.has(stem(word))) continue;
      if (used + word.length + 2 > room) break;
      top.push(word);
      used += word.length + 2;
    }
    if (top.length > 0) kept.push(`keywords: ${top.join(", ")}`);
  }
  return fit(kept);
}

/** Joins the parts with `; ` and cuts the result to the size limit, at a word boundary. */
function fit(parts: readonly string[]): string {
  const description = parts.join("; ").replace(/\s+/g, " ").trim();
  if (description.length <= MAX_DESCRIPTION) return description;
  const cut = description.slice(0, MAX_DESCRIPTION - 3);
  const space = cut.lastIndexOf(" ");
  return `${(space > MAX_DESCRIPTION / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:]+$/, "")}...`;
}

/** What {@link markdownLines} yields where a code fence opens (the fenced lines are left out). */
export const FENCE: unique symbol = Symbol("fence");

/** A Markdown text's lines, trimmed, outside code fences (``` or ~~~, closed by the same run); {@link FENCE} where one opens. */
export function* markdownLines(text: string): Generator<string | typeof FENCE> {
  let fence: string | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (fence !== undefined) {
      if (line.startsWith(fence)) fence = undefined;
      continue;
    }
    const marker = /^(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined) {
      fence = marker;
      yield FENCE;
      continue;
    }
    yield line;
  }
}

/** A Markdown file's headings (inline markup removed) and its first paragraph of prose, outside code fences. */
function markdownOutline(text: string): { headings: string[]; paragraph?: string } {
  const headings: string[] = [];
  let paragraph: string[] | undefined;
  /** The first list, in case the file has no paragraph of prose. */
  let items: string[] | undefined;
  let done = false;
  for (const line of markdownLines(text.replace(/^---\n[\s\S]*?\n---\n/, ""))) {
    if (line === FENCE) {
      if (paragraph) done = true;
      continue;
    }
    const heading = /^#{1,6}\s+(.+)$/.exec(line)?.[1];
    if (heading !== undefined) {
      const clean = inline(withoutClosingHashes(heading));
      if (clean !== "" && headings.length < MAX_NAMES) headings.push(clean);
      if (paragraph) done = true;
      continue;
    }
    if (done) continue;
    if (line === "") {
      if (paragraph) done = true;
      continue;
    }
    const prose = !/^(?:<|!\[|\[!\[|\||[-=*_]{3,}$|\[\/\/\]|>?\s*\[!)/.test(line) && /\p{L}{2,}/u.test(line);
    const item = /^(?:[-*+]|\d+\.)\s+/.test(line);
    if (prose && item && !paragraph) {
      if (items === undefined || items.length < 8) (items ??= []).push(inline(line.replace(/^(?:[-*+]|\d+\.)\s+/, "")));
    } else if (prose) (paragraph ??= []).push(inline(line.replace(/^>\s*/, "")));
    else if (paragraph) done = true;
  }
  const joined = (paragraph ?? items)?.join(paragraph ? " " : ", ").trim();
  return joined ? { headings, paragraph: joined } : { headings };
}

/** A heading without its closing `#`s (`## Title ##`), by a scan: `/\s+#+$/` backtracks on long runs. */
function withoutClosingHashes(heading: string): string {
  let end = heading.length;
  while (end > 0 && heading[end - 1] === "#") end--;
  return end < heading.length && (end === 0 || heading[end - 1] === " ") ? heading.slice(0, end) : heading;
}

/** Markdown inline markup removed: links keep their text, code and emphasis marks go. */
function inline(text: string): string {
  return text
    .replace(/!?\[([^\]]{0,200})\]\([^)]{0,500}\)/g, "$1")
    .replace(/[`*_]+/g, "")
    .replace(/<[^<>]{0,200}>/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

/** The first sentences of `text`, up to {@link MAX_LEAD} characters (at least the first one, cut at a word). */
function sentences(text: string): string {
  const trimmed = text.replace(/\s+/g, " ").trim();
  let end = 0;
  for (let i = 0; i < trimmed.length; i++) {
    const c = trimmed[i];
    if ((c === "." || c === "!" || c === "?") && (i + 1 === trimmed.length || trimmed[i + 1] === " ")) {
      if (end > 0 && i + 1 > MAX_LEAD) break;
      end = i + 1;
      if (end >= MAX_LEAD) break;
    }
  }
  const out = end > 0 ? trimmed.slice(0, end) : trimmed;
  if (out.length <= MAX_LEAD + 20) return out;
  const cut = out.slice(0, MAX_LEAD - 3);
  const space = cut.lastIndexOf(" ");
  return `${space > MAX_LEAD / 2 ? cut.slice(0, space) : cut}...`;
}

/** Comments passed over as leads: licence headers, and directives to linters and tools. */
const LICENSE =
  /copyright|licen[cs]e|spdx|all rights reserved|definitions by:|^\s*(?:eslint|global |jshint|istanbul|prettier-|@ts-|tslint|c8 |webpack)/i;

/** Commented-out code rather than prose. */
const CODE = /^(?:const|let|var|import|export|require|return|if|for|await|function)\b|[;{}(=]$/;

/**
 * The leading comment of a source file: after a shebang, `"use strict"` and licence headers; failing that, the
 * first top-level `//` or `/** … *\/` comment that reads as prose (not commented-out code).
 */
function codeLead(text: string): string | undefined {
  let rest = text.replace(/^#!.*\n/, "");
  for (let i = 0; i < 8; i++) {
    rest = rest.replace(/^\s*(?:(["'])use strict\1;?[ \t]*\n)?\s*/, "");
    const comment = blockComment(rest) ?? leadingComment(rest, "//");
    if (comment === undefined) break;
    if (!LICENSE.test(comment) && !CODE.test(comment)) return comment;
    const end = rest.startsWith("/*") ? rest.indexOf("*/") + 2 : rest.search(/\n(?!\s*\/\/)/);
    if (end <= 1) return undefined;
    rest = rest.slice(end);
  }
  for (const match of text.matchAll(/^(?:\/\/[ \t]?(.+)|\/\*\*([^*][\s\S]{0,2000}?)\*\/)/gm)) {
    const comment = (match[1] ?? blockComment(`/**${match[2] ?? ""}*/`) ?? "").trim();
    if (!LICENSE.test(comment) && !CODE.test(comment) && /^\p{L}+(?: \S+){2,}/u.test(comment)) return comment;
  }
  return undefined;
}

/** Names a JavaScript or TypeScript file exports: ES `export` declarations and lists, and CommonJS `exports`. */
function exportedNames(text: string): string[] {
  const names: string[] = [];
  const add = (name: string | undefined) => {
    if (name !== undefined && /^[A-Za-z_$][\w$]*$/.test(name) && name !== "default") names.push(name);
  };
  for (const m of text.matchAll(
    /^export\s+(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/gm,
  ))
    add(m[1]);
  for (const m of text.matchAll(/^export\s+(?:type\s+)?\{([^}]{0,2000})\}/gm))
    for (const item of (m[1] ?? "").split(",")) add(item.trim().split(/\s+/).pop());
  for (const m of text.matchAll(/^(?:module\.)?exports\.([A-Za-z_$][\w$]*)\s*=(?!=)/gm)) add(m[1]);
  for (const m of text.matchAll(/^Object\.defineProperty\(exports, "([A-Za-z_$][\w$]*)"/gm)) add(m[1]);
  for (const m of text.matchAll(
    /^module\.exports\s*=\s*(?:(?:async\s+)?function\*?\s*([A-Za-z_$][\w$]*)|class\s+([A-Za-z_$][\w$]*)|([A-Za-z_$][\w$]*)\s*;?\s*$)/gm,
  ))
    add(m[1] ?? m[2] ?? m[3]);
  const object = /^module\.exports\s*=\s*\{([^}]{0,4000})\}/m.exec(text)?.[1];
  if (object !== undefined) for (const item of object.split(/,|\n/)) add(/^\s*(?:\.\.\.)?([A-Za-z_$][\w$]*)/.exec(item)?.[1]);
  return [...new Set(names)];
}

/** Top-level functions, classes and function-valued constants of a JavaScript or TypeScript file. */
function topLevelNames(text: string): string[] {
  const names = [
    ...text.matchAll(
      /^(?:async\s+)?(?:function\*?\s*([A-Za-z_$][\w$]*)|class\s+([A-Za-z_$][\w$]*)|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?(?:function\b|\([^()\n]{0,200}\)\s*=>|[A-Za-z_$][\w$]*\s*=>))/gm,
    ),
  ].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
  return [...new Set(names.filter((n) => n !== ""))];
}

/** A JSON file's `name` and `description` values, and its top-level keys (when the head read parses). */
function jsonOutline(text: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const first = text.split("\n").find((l) => l.trim() !== "");
    return first ? [first.trim()] : [];
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
  const record = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of ["name", "description"]) if (typeof record[key] === "string") parts.push(record[key] as string);
  const keys = Object.keys(record);
  if (keys.length > 0) parts.push(`keys: ${list(keys)}`);
  return parts;
}

/** The metadata line stored in the index for a file. */
export function metadataOf(path: string, size: number, description: string): string {
  return [`language: ${languageOf(path) ?? "unknown"}`, `size: ${formatSize(size)}`, `name: ${basename(path)}`, description]
    .filter((p) => p !== "")
    .join("; ");
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function blockComment(text: string): string | undefined {
  const match = /^\s*(?:#!.*\n\s*)?\/\*\*?([\s\S]*?)\*\//.exec(text);
  return match?.[1]
    ?.split("\n")
    .map((l) => l.replace(/^\s*\*\s?/, "").trim())
    .filter((l) => l !== "" && !l.startsWith("@"))
    .join(" ");
}

function leadingComment(text: string, marker: string): string | undefined {
  const lines: string[] = [];
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed.startsWith(marker))
      lines.push(
        trimmed
          .slice(marker.length)
          .replace(/^[!/]\s?/, "")
          .trim(),
      );
    else if (trimmed === "" && lines.length === 0) continue;
    else break;
  }
  const joined = lines.filter((l) => l !== "").join(" ");
  return joined === "" ? undefined : joined;
}

function firstSentence(text: string): string {
  const sentence = /^(.+?[.!?])(?:\s|$)/.exec(text.trim())?.[1] ?? text.trim();
  return sentence.length > 160 ? `${sentence.slice(0, 157)}...` : sentence;
}

function list(names: readonly string[], max = MAX_NAMES): string {
  const unique = [...new Set(names)];
  return unique.length > max ? `${unique.slice(0, max).join(", ")}, ...` : unique.join(", ");
}
