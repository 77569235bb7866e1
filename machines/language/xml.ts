/**
 * Well-formedness and raw structure: validates the template text with fast-xml-parser, parses it
 * (order preserved, no type coercion) and returns a small element tree with source offsets.
 * Knows nothing about the template language.
 */
import { XMLParser, XMLValidator } from "fast-xml-parser";
import type { SourceLocation } from "./ast.js";
import { InvalidTemplateError } from "./errors.js";
import { SourceText } from "./locate.js";
import { MAX_TEMPLATE_DEPTH, prescanXml } from "./xml-scan.js";
import { messageOf } from "../../protocol/errors.js";

export { MAX_TEMPLATE_DEPTH };

/** An element with its attributes, children and [start, end) offsets in the user's text. */
export interface XmlElement {
  readonly type: "element";
  readonly name: string;
  readonly attrs: Readonly<Record<string, string>>;
  readonly children: readonly XmlChild[];
  readonly start: number;
  readonly end: number;
  readonly loc: SourceLocation;
}

/** A run of character data; `at` is where it begins, give or take leading whitespace and comments. */
export interface XmlText {
  readonly type: "text";
  readonly text: string;
  readonly at: number;
}

/** A child of an element. */
export type XmlChild = XmlElement | XmlText;

/** The parsed text: its top-level children (elements and text), and the source for locations. */
export interface XmlDocument {
  readonly source: SourceText;
  readonly roots: readonly XmlChild[];
}

/** Largest template accepted, in UTF-8 bytes. */
export const MAX_TEMPLATE_BYTES = 1024 * 1024;

// Snippets may hold several top-level elements; the wrapper makes them one document. It sits on
// line 1 with no newline, so only columns of line 1 shift (by PREFIX.length).
const WRAPPER = "dirigent-template-root";
const PREFIX = `<${WRAPPER}>`;
const SUFFIX = `</${WRAPPER}>`;
const ATTR_PREFIX = "@_";

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: ATTR_PREFIX,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  captureMetaData: true,
  processEntities: true,
  // Decodes numeric character references (&#65;) in one pass; DOCTYPE entities are refused before parsing.
  htmlEntities: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  // The pre-scan refuses deeper nesting first, with its location; this is a second line of defence.
  maxNestedTags: MAX_TEMPLATE_DEPTH + 1,
});

/**
 * Validate and parse template text into raw elements.
 * @throws InvalidTemplateError when the text is too large, not XML, or not well-formed.
 */
export function readXml(text: string): XmlDocument {
  const source = new SourceText(text);
  if (text.length > MAX_TEMPLATE_BYTES / 3 && new TextEncoder().encode(text).length > MAX_TEMPLATE_BYTES) {
    throw new InvalidTemplateError(`template too large: more than ${MAX_TEMPLATE_BYTES} bytes`, { line: 1, col: 1 });
  }
  if (text.includes(WRAPPER)) {
    throw new InvalidTemplateError(`reserved name '${WRAPPER}' in template`, source.locate(text.indexOf(WRAPPER)));
  }
  const prepared = blankProlog(text);
  prescanXml(prepared, source);
  const wrapped = PREFIX + prepared + SUFFIX;
  const verdict = XMLValidator.validate(wrapped);
  if (verdict !== true) throw wellFormednessError(verdict.err, source, wrapped);

  let output: unknown;
  try {
    output = parser.parse(wrapped);
  } catch (cause) {
    const reason = messageOf(cause);
    const message = /nested tags/i.test(reason)
      ? `template nests elements too deeply (more than ${MAX_TEMPLATE_DEPTH} levels)`
      : `template could not be parsed: ${reason.replace(/^\[[A-Z]+\]\s*/, "")}`;
    throw new InvalidTemplateError(message, { line: 1, col: 1 }, undefined, { cause });
  }
  const root = Array.isArray(output) ? output[0] : undefined;
  const top = isRecord(root) ? root[WRAPPER] : undefined;
  const roots = Array.isArray(top) ? convertChildren(top, 0, source) : [];
  return { source, roots };
}

// A BOM or an XML declaration is legal only at the very start, which the wrapper takes; blank them
// with same-length whitespace so offsets stay valid.
function blankProlog(text: string): string {
  let out = text.startsWith("\ufeff") ? ` ${text.slice(1)}` : text;
  const decl = /^\s*<\?xml[\s\S]*?\?>/.exec(out);
  if (decl !== null) out = decl[0].replace(/[^\n]/g, " ") + out.slice(decl[0].length);
  return out;
}

interface ValidatorIssue {
  readonly code: string;
  readonly msg: string;
  readonly line: number;
  readonly col?: number;
}

function wellFormednessError(err: ValidatorIssue, source: SourceText, wrapped: string): InvalidTemplateError {
  const wrappedSource = new SourceText(wrapped);
  const toUser = (line: number, col: number): SourceLocation => source.locate(wrappedSource.offsetOf(line, col) - PREFIX.length);
  const at = toUser(err.line, err.col ?? 1);
  const fail = (message: string, loc: SourceLocation = at): InvalidTemplateError =>
    new InvalidTemplateError(`not well-formed XML: ${message}`, loc);

  const mismatch = /^Expected closing tag '([^']*)' \(opened in line (\d+), col (\d+)\) instead of closing tag '([^']*)'/.exec(err.msg);
  if (mismatch !== null) {
    const [, opened = "", line = "1", col = "1", closing = ""] = mismatch;
    const openedAt = toUser(Number(line), Number(col));
    if (closing === WRAPPER) return fail(`unclosed tag '<${opened}>'`, openedAt);
    if (opened === WRAPPER) return fail(`closing tag '</${closing}>' has no matching start tag`);
    return fail(`mismatched tag: '</${closing}>' closes '<${opened}>' opened at line ${openedAt.line}, col ${openedAt.col}`);
  }
  if (err.msg.includes(WRAPPER)) {
    return fail("unexpected end of text (unterminated comment, CDATA section or tag?)", source.locate(source.text.length));
  }
  if (err.msg === "char '&' is not expected.") return fail("unescaped '&' (write '&amp;' for a literal ampersand)");
  const message = err.msg.replace(/\.$/, "");
  return fail(message.charAt(0).toLowerCase() + message.slice(1));
}

function convertChildren(entries: readonly unknown[], textStart: number, source: SourceText): XmlChild[] {
  const out: XmlChild[] = [];
  let at = textStart;
  for (const entry of entries) {
    const child = convertEntry(entry, at, source);
    if (child === undefined) continue;
    out.push(child);
    if (child.type === "element") at = child.end;
  }
  return out;
}

const META = XMLParser.getMetaDataSymbol();

function convertEntry(entry: unknown, at: number, source: SourceText): XmlChild | undefined {
  if (!isRecord(entry)) return undefined;
  const name = Object.keys(entry).find((key) => key !== ":@");
  if (name === undefined) return undefined;
  const value = entry[name];
  if (name === "#text") return typeof value === "string" ? { type: "text", text: value, at } : undefined;
  if (!Array.isArray(value)) return undefined;

  const meta: unknown = typeof META === "symbol" || typeof META === "string" ? Reflect.get(entry, META) : undefined;
  const startIndex = isRecord(meta) && typeof meta.startIndex === "number" ? meta.startIndex - PREFIX.length : at;
  const endIndex = isRecord(meta) && typeof meta.endIndex === "number" ? meta.endIndex - PREFIX.length : startIndex;
  const start = Math.max(0, startIndex);
  return {
    type: "element",
    name,
    attrs: convertAttributes(entry[":@"]),
    children: convertChildren(value, source.startTagEnd(start), source),
    start,
    end: Math.max(start, endIndex),
    loc: source.locate(start),
  };
}

function convertAttributes(raw: unknown): Record<string, string> {
  const attrs: Record<string, string> = {};
  if (!isRecord(raw)) return attrs;
  for (const [key, value] of Object.entries(raw)) {
    const name = key.startsWith(ATTR_PREFIX) ? key.slice(ATTR_PREFIX.length) : key;
    if (typeof value === "string" && name !== "__proto__") attrs[name] = value;
  }
  return attrs;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
