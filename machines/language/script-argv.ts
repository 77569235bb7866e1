/**
 * The command line of a `script` task split into argv, for no shell to see: words separated by whitespace, `'…'` taken
 * literally, `"…"` with `\"` and `\\` escapes, `\x` outside quotes the character x. No shell syntax exists: `;`,
 * `|`, `$(…)` and globs are ordinary characters. `{{var}}` is substituted per element *after* splitting, so a
 * value can never add arguments.
 */

/** The argv of a command line, or why it does not split. */
export type SplitOutcome = { readonly ok: true; readonly argv: string[] } | { readonly ok: false; readonly error: string };

/** Splits a command line into argv. */
export function splitCommand(text: string): SplitOutcome {
  const argv: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === "\\" && (text.charAt(i + 1) === '"' || text.charAt(i + 1) === "\\")) word += text.charAt(++i);
      else word += c;
    } else if (/\s/.test(c)) {
      if (inWord) argv.push(word);
      word = "";
      inWord = false;
    } else {
      inWord = true;
      if (c === "'" || c === '"') quote = c;
      else if (c === "\\" && i + 1 < text.length) word += text.charAt(++i);
      else word += c;
    }
  }
  if (quote) return { ok: false, error: `unterminated ${quote} quote in command` };
  if (inWord) argv.push(word);
  if (argv.length === 0) return { ok: false, error: "the command is empty" };
  return { ok: true, argv };
}
