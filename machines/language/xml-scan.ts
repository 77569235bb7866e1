/**
 * A linear pre-scan of template text, before fast-xml-parser sees it: refuses markup declarations (`<!DOCTYPE`,
 * `<!ENTITY`, …: entities are never declared, so never expanded, so no "billion laughs") and nesting deeper than
 * {@link MAX_TEMPLATE_DEPTH}, each with its line and column. fast-xml-parser's validator and parser walk nested
 * elements themselves; this keeps a 100,000-deep document from reaching them. Everything else about
 * well-formedness is left to the validator: the scan only skips comments, CDATA sections, processing instructions
 * and quoted attribute values, and counts open elements.
 */
import { InvalidTemplateError } from "./errors.js";
import type { SourceText } from "./locate.js";

/** Deepest nesting of elements a template may have (the template's own top-level elements are level 1). */
export const MAX_TEMPLATE_DEPTH = 100;

const LT = 60;
const GT = 62;
const SLASH = 47;
const BANG = 33;
const QUESTION = 63;
const DQUOTE = 34;
const SQUOTE = 39;

/**
 * Scans `text` once (each character is looked at a bounded number of times).
 * @throws InvalidTemplateError at a markup declaration, or at the first start tag deeper than the limit.
 */
export function prescanXml(text: string, source: SourceText): void {
  let depth = 0;
  let at = 0;
  while (at < text.length) {
    const lt = text.indexOf("<", at);
    if (lt === -1) return;
    const next = text.charCodeAt(lt + 1);
    if (next === BANG) {
      if (text.startsWith("<!--", lt)) at = after(text, "-->", lt + 4);
      else if (text.startsWith("<![CDATA[", lt)) at = after(text, "]]>", lt + 9);
      else {
        throw new InvalidTemplateError(
          `markup declarations such as <!DOCTYPE> and <!ENTITY> are not allowed in templates (entities are never expanded)`,
          source.locate(lt),
        );
      }
    } else if (next === QUESTION) at = after(text, "?>", lt + 2);
    else if (next === SLASH) {
      depth = Math.max(0, depth - 1);
      at = lt + 2;
    } else if (isNameStart(next)) {
      const end = tagEnd(text, lt + 1);
      if (end === -1) return;
      if (text.charCodeAt(end) === LT) {
        at = end;
        continue;
      }
      if (text.charCodeAt(end - 1) !== SLASH && ++depth > MAX_TEMPLATE_DEPTH) {
        throw new InvalidTemplateError(`template nests elements too deeply (more than ${MAX_TEMPLATE_DEPTH} levels)`, source.locate(lt));
      }
      at = end + 1;
    } else at = lt + 1;
  }
}

/** The offset after the next `close` from `from`, or the end of the text (the validator reports what is unclosed). */
function after(text: string, close: string, from: number): number {
  const end = text.indexOf(close, from);
  return end === -1 ? text.length : end + close.length;
}

/**
 * The offset of the `>` that ends the start tag whose name begins at `from` (quoted values skipped), of a `<` that
 * comes first (not well-formed: scanning goes on from there), or -1.
 */
function tagEnd(text: string, from: number): number {
  let quote = 0;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quote !== 0) {
      if (c === quote) quote = 0;
    } else if (c === DQUOTE || c === SQUOTE) quote = c;
    else if (c === GT || c === LT) return i;
  }
  return -1;
}

/** XML name-start characters, approximately: letters, `_`, `:` and anything beyond ASCII. */
function isNameStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 58 || c > 127;
}
