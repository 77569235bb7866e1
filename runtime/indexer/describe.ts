/**
 * Free-text metadata of one file for the index: its language (by extension), its size, and a short description
 * taken from the text (first Markdown heading, leading comment or docstring, exported or defined names).
 */
import { basename, extname } from "node:path";

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

/** A short description from the start of a file's text; empty when nothing useful is found. */
export function describe(path: string, text: string): string {
  const language = languageOf(path);
  const parts: string[] = [];
  if (language === "Markdown") {
    const heading = /^#{1,6}\s+(.+)$/m.exec(text)?.[1];
    if (heading) parts.push(heading.trim());
  } else if (language === "Python") {
    const doc = /^\s*(?:#.*\n|\s)*(?:[rRuU]?)("""|''')([\s\S]*?)\1/.exec(text)?.[2];
    const lead = doc ?? leadingComment(text, "#");
    if (lead) parts.push(firstSentence(lead));
    const names = [...text.matchAll(/^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)/gm)].map((m) => m[1] ?? "");
    if (names.length > 0) parts.push(`defines: ${list(names)}`);
  } else if (language === "TypeScript" || language === "JavaScript") {
    const lead = blockComment(text) ?? leadingComment(text, "//");
    if (lead) parts.push(firstSentence(lead));
    const names = [
      ...text.matchAll(
        /^export\s+(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/gm,
      ),
    ].map((m) => m[1] ?? "");
    if (names.length > 0) parts.push(`exports: ${list(names)}`);
  } else if (language === "Go" || language === "Rust" || language === "Java" || language === "C" || language === "C++") {
    const lead = blockComment(text) ?? leadingComment(text, "//");
    if (lead) parts.push(firstSentence(lead));
    const names = [...text.matchAll(/^(?:pub\s+)?(?:func|fn|struct|trait|type|class|interface)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)/gm)].map(
      (m) => m[1] ?? "",
    );
    if (names.length > 0) parts.push(`defines: ${list(names)}`);
  } else {
    const lead = leadingComment(text.replace(/^#!.*\n/, ""), "#") ?? blockComment(text);
    if (lead) parts.push(firstSentence(lead));
    else {
      const first = text.split("\n").find((l) => l.trim() !== "");
      if (first) parts.push(first.trim());
    }
  }
  const description = parts.join("; ").replace(/\s+/g, " ").trim();
  return description.length > MAX_DESCRIPTION ? `${description.slice(0, MAX_DESCRIPTION - 3)}...` : description;
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

function list(names: readonly string[]): string {
  const unique = [...new Set(names)];
  return unique.length > MAX_NAMES ? `${unique.slice(0, MAX_NAMES).join(", ")}, ...` : unique.join(", ");
}
