/**
 * No module-level mutable state in actors/ or runtime/: two systems started in one process must not share any. A
 * top-level `let`/`var`, or a top-level `new Map|Set|WeakMap|WeakSet` not typed `ReadonlyMap`/`ReadonlySet` (a constant
 * lookup table the compiler keeps from being written), fails naming the file and line. State belongs to a role
 * instance, a connection, or a system (see runtime/system.ts).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

/**
 * Findings allowed, as `file:line-text`, each with its reason. Keep it short: fix rather than allow.
 */
const ALLOWED: Record<string, string> = {};

const COLLECTIONS = new Set(["Map", "Set", "WeakMap", "WeakSet"]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** Module-level mutable state of the source `text` of `file`: `file:line: text` for each finding. */
function findings(file: string, text: string): { key: string; where: string }[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: { key: string; where: string }[] = [];
  const report = (node: ts.Node, what: string) => {
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    found.push({ key: `${file}: ${what}`, where: `${file}:${line}: ${node.getText(source).split("\n")[0] ?? ""}` });
  };
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    const constant = (list.flags & ts.NodeFlags.Const) !== 0;
    for (const declaration of list.declarations) {
      const name = declaration.name.getText(source);
      if (!constant) {
        report(statement, `${(list.flags & ts.NodeFlags.Let) !== 0 ? "let" : "var"} ${name}`);
        continue;
      }
      const init = declaration.initializer;
      if (init === undefined || !ts.isNewExpression(init) || !COLLECTIONS.has(init.expression.getText(source))) continue;
      const type = declaration.type?.getText(source) ?? "";
      if (!/^Readonly(Map|Set)</.test(type)) report(statement, `new ${init.expression.getText(source)} ${name}`);
    }
  }
  return found;
}

describe("module-level state", () => {
  const all = ["actors", "runtime"]
    .flatMap((dir) => files(join(root, dir)))
    .flatMap((path) => findings(relative(root, path), readFileSync(path, "utf8")));

  it("actors/ and runtime/ keep none that two systems in one process would share", () => {
    expect(all.filter((f) => !(f.key in ALLOWED)).map((f) => f.where)).toEqual([]);
  });

  it("allows only what is still there", () => {
    expect(Object.keys(ALLOWED).filter((key) => !all.some((f) => f.key === key))).toEqual([]);
  });

  it("finds a top-level let, var and writable collection, and nothing nested", () => {
    const sample = [
      `const TABLE: ReadonlySet<string> = new Set(["a"]);`,
      `let counter = 0;`,
      `var legacy = 1;`,
      `const cache = new Map<string, number>();`,
      `export const seen = new WeakSet<object>();`,
      `export function make() {`,
      `  let local = 0;`,
      `  const kept = new Map();`,
      `  return () => kept.set(local++, 1);`,
      `}`,
    ].join("\n");
    expect(findings("sample.ts", sample).map((f) => f.where)).toEqual([
      "sample.ts:2: let counter = 0;",
      "sample.ts:3: var legacy = 1;",
      "sample.ts:4: const cache = new Map<string, number>();",
      "sample.ts:5: export const seen = new WeakSet<object>();",
    ]);
  });
});
