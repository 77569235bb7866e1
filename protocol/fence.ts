/**
 * Markdown fences in model answers, found by scanning instead of by regular expressions: the patterns these replace
 * (e.g. /```(?:json)?\s*\n?([\s\S]*?)```/) backtrack quadratically over a fence followed by a long run of
 * whitespace with no closing fence (80,000 newlines took 8 s).
 */

const SPACE = /\s/;

/** Whether `char` is whitespace as `\s` means it in a regular expression. */
export function isSpace(char: string | undefined): boolean {
  return char !== undefined && SPACE.test(char);
}

/**
 * The text of the first fenced block: after the first ``` that has a closing ``` after it, an optional `json` or
 * `JSON` tag and whitespace, up to that closing fence; undefined when there is none. As the regular expression
 * /```(?:json|JSON)?\s*\n?([\s\S]*?)```/ would capture, in linear time.
 */
export function fencedBlock(text: string): string | undefined {
  const open = text.indexOf("```");
  if (open < 0) return undefined;
  let at = open + 3;
  if (text.startsWith("json", at) || text.startsWith("JSON", at)) at += 4;
  while (at < text.length && isSpace(text[at])) at++;
  // Tag and whitespace hold no backtick, so a closing fence of a later opening one is also found from here.
  const close = text.indexOf("```", at);
  return close < 0 ? undefined : text.slice(at, close);
}

/**
 * `text` without a leading "```" (with an optional `json` and whitespace) and a trailing "```" (with whitespace), as
 * .replace(/^```(?:json)?\s*|\s*```$/g, "") would, by scanning: that expression backtracks quadratically over a long
 * run of whitespace.
 */
export function withoutFenceMarks(text: string): string {
  let start = 0;
  if (text.startsWith("```")) {
    start = text.startsWith("json", 3) ? 7 : 3;
    while (start < text.length && isSpace(text[start])) start++;
  }
  let end = text.length;
  if (end - start >= 3 && text.endsWith("```")) {
    end -= 3;
    while (end > start && isSpace(text[end - 1])) end--;
  }
  return text.slice(start, end);
}
