/**
 * Offsets → 1-based line/column in the user's template text, and small scans over that text
 * (start-tag ends, inner markup) that fast-xml-parser does not provide.
 */
import type { SourceLocation } from "./ast.js";

/** The user's template text with a line index. */
export class SourceText {
  private readonly lineStarts: number[] = [0];

  constructor(readonly text: string) {
    // Lines break on "\n" only, as fast-xml-parser's validator counts them (a CR before it is part of the line).
    for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) this.lineStarts.push(i + 1);
  }

  /** Location of a UTF-16 offset (clamped into the text). */
  locate(offset: number): SourceLocation {
    const index = Math.max(0, Math.min(offset, this.text.length));
    let low = 0;
    let high = this.lineStarts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((this.lineStarts[middle] ?? 0) <= index) low = middle;
      else high = middle - 1;
    }
    return { line: low + 1, col: index - (this.lineStarts[low] ?? 0) + 1 };
  }

  /** Offset of a 1-based line/column, clamped into the text. */
  offsetOf(line: number, col: number): number {
    const start = this.lineStarts[Math.max(0, Math.min(line, this.lineStarts.length) - 1)] ?? 0;
    return Math.max(0, Math.min(start + col - 1, this.text.length));
  }

  /** Offset just past the `>` that ends the start tag beginning at `start` (quotes respected). */
  startTagEnd(start: number): number {
    let quote = "";
    for (let i = start + 1; i < this.text.length; i++) {
      const c = this.text[i];
      if (quote !== "") {
        if (c === quote) quote = "";
      } else if (c === '"' || c === "'") quote = c;
      else if (c === ">") return i + 1;
    }
    return this.text.length;
  }

  /** First offset at or after `from` that is neither whitespace nor inside a comment or processing instruction. */
  firstContent(from: number): number {
    let i = from;
    while (i < this.text.length) {
      if (/\s/.test(this.text[i] ?? "")) i++;
      else if (this.text.startsWith("<!--", i)) i = skipPast(this.text, "-->", i);
      else if (this.text.startsWith("<?", i)) i = skipPast(this.text, "?>", i);
      else break;
    }
    return i;
  }

  /**
   * Text between the start and end tag of the element spanning [start, end), with comments removed,
   * CDATA unwrapped and character references decoded: used for prose that contains markup.
   */
  innerText(start: number, end: number): string {
    const open = this.startTagEnd(start);
    const close = this.text.lastIndexOf("</", end - 1);
    if (close < open) return "";
    return decodeMarkup(this.text.slice(open, close));
  }
}

function skipPast(text: string, terminator: string, from: number): number {
  const at = text.indexOf(terminator, from);
  return at === -1 ? text.length : at + terminator.length;
}

const NAMED: Readonly<Record<string, string>> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

// One pass, so "&amp;lt;" decodes to "&lt;" and CDATA content is never decoded.
const MARKUP = /<!--[\s\S]*?-->|<!\[CDATA\[([\s\S]*?)\]\]>|&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot|apos);/g;

/** Remove comments, unwrap CDATA sections and decode XML character references in raw markup. */
export function decodeMarkup(raw: string): string {
  return raw.replace(MARKUP, (match, cdata: string | undefined, ref: string | undefined) => {
    if (cdata !== undefined) return cdata;
    if (ref === undefined) return "";
    if (ref.startsWith("#")) {
      const code = ref[1] === "x" || ref[1] === "X" ? Number.parseInt(ref.slice(2), 16) : Number.parseInt(ref.slice(1), 10);
      return code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : match;
    }
    return NAMED[ref] ?? match;
  });
}
