/**
 * A small, safe expression language for `<case test>` (and later termination conditions): no `eval`.
 *
 * Grammar: `a || b`, `a && b`, `!a`, comparisons `== === != !== < <= > >=`, parentheses, literals (numbers,
 * `"…"`/`'…'` strings, `true`, `false`, `null`) and variable paths (`x`, `a.b`, `a?.b`, `results[1].name`)
 * resolved in an {@link Env}. An unknown variable is `undefined`; `==` compares loosely (`"3" == 3`),
 * `===` strictly. Any syntax error is reported, never thrown.
 */
import { find, type Env } from "./env.js";
import { messageOf } from "../../protocol/errors.js";

/** Outcome of {@link evaluateTest}. */
export type TestOutcome = { readonly ok: true; readonly value: boolean } | { readonly ok: false; readonly error: string };

type Token =
  | { kind: "num"; value: number }
  | { kind: "str"; value: string }
  | { kind: "path"; value: string }
  | { kind: "op"; value: string };

const TOKEN =
  /\s*(?:(\d+(?:\.\d+)?)|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([A-Za-z_][\w-]*(?:(?:\?\.|\.)[A-Za-z_0-9][\w-]*|\[\d+\])*)|(===|!==|==|!=|<=|>=|&&|\|\||[<>!()]))/y;

function tokenize(text: string): Token[] | string {
  const tokens: Token[] = [];
  TOKEN.lastIndex = 0;
  let at = 0;
  while (text.slice(at).trim() !== "") {
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(text);
    if (!m) return `unexpected text at column ${at + 1}: '${text.slice(at).trim().slice(0, 20)}'`;
    at = TOKEN.lastIndex;
    if (m[1] !== undefined) tokens.push({ kind: "num", value: Number(m[1]) });
    else if (m[2] !== undefined || m[3] !== undefined) tokens.push({ kind: "str", value: (m[2] ?? m[3] ?? "").replace(/\\(.)/g, "$1") });
    else if (m[4] !== undefined) tokens.push({ kind: "path", value: m[4] });
    else if (m[5] !== undefined) tokens.push({ kind: "op", value: m[5] });
  }
  return tokens;
}

class Parser {
  #i = 0;
  constructor(
    private readonly tokens: Token[],
    private readonly env: Env,
  ) {}

  done(): boolean {
    return this.#i >= this.tokens.length;
  }

  #peekOp(...ops: string[]): string | undefined {
    const t = this.tokens[this.#i];
    return t?.kind === "op" && ops.includes(t.value) ? t.value : undefined;
  }

  or(): unknown {
    let left = this.and();
    while (this.#peekOp("||")) {
      this.#i++;
      const right = this.and();
      left = truthy(left) || truthy(right);
    }
    return left;
  }

  and(): unknown {
    let left = this.compare();
    while (this.#peekOp("&&")) {
      this.#i++;
      const right = this.compare();
      left = truthy(left) && truthy(right);
    }
    return left;
  }

  compare(): unknown {
    const left = this.unary();
    const op = this.#peekOp("===", "!==", "==", "!=", "<=", ">=", "<", ">");
    if (!op) return left;
    this.#i++;
    return compare(op, left, this.unary());
  }

  unary(): unknown {
    if (this.#peekOp("!")) {
      this.#i++;
      return !truthy(this.unary());
    }
    const t = this.tokens[this.#i++];
    if (!t) throw new SyntaxError("expression ends early");
    if (t.kind === "num" || t.kind === "str") return t.value;
    if (t.kind === "path") {
      if (t.value === "true" || t.value === "false") return t.value === "true";
      if (t.value === "null" || t.value === "undefined") return null;
      const found = find(this.env, t.value.replaceAll("?.", "."));
      return found.found ? found.value : undefined;
    }
    if (t.value === "(") {
      const inner = this.or();
      if (!this.#peekOp(")")) throw new SyntaxError("missing ')'");
      this.#i++;
      return inner;
    }
    throw new SyntaxError(`unexpected '${t.value}'`);
  }
}

function truthy(value: unknown): boolean {
  if (typeof value === "string") return value !== "" && value !== "false";
  return Boolean(value);
}

function numeric(value: unknown): number | undefined {
  if (typeof value === "number") return value;
  if (typeof value === "string" && value.trim() !== "" && !Number.isNaN(Number(value))) return Number(value);
  return undefined;
}

function compare(op: string, a: unknown, b: unknown): boolean {
  if (op === "===") return a === b;
  if (op === "!==") return a !== b;
  const na = numeric(a);
  const nb = numeric(b);
  if (op === "==" || op === "!=") {
    const equal = na !== undefined && nb !== undefined ? na === nb : a == null || b == null ? a == b : String(a) === String(b);
    return op === "==" ? equal : !equal;
  }
  if (na !== undefined && nb !== undefined) return op === "<" ? na < nb : op === "<=" ? na <= nb : op === ">" ? na > nb : na >= nb;
  if (typeof a !== "string" || typeof b !== "string") return false;
  return op === "<" ? a < b : op === "<=" ? a <= b : op === ">" ? a > b : a >= b;
}

/**
 * Evaluates a test expression in `env`.
 *
 * @example
 * evaluateTest('score >= 3 && kind == "fix"', rootEnv({ score: "4", kind: "fix" })); // → { ok: true, value: true }
 */
export function evaluateTest(text: string, env: Env): TestOutcome {
  const tokens = tokenize(text);
  if (typeof tokens === "string") return { ok: false, error: tokens };
  if (tokens.length === 0) return { ok: false, error: "empty expression" };
  try {
    const parser = new Parser(tokens, env);
    const value = parser.or();
    if (!parser.done()) return { ok: false, error: "unexpected text after the expression" };
    return { ok: true, value: truthy(value) };
  } catch (error) {
    return { ok: false, error: messageOf(error) };
  }
}
