import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

/**
 * The layers, lowest first: protocol ← language ← machines ← actors ← runtime. `language` is `machines/language/`
 * (the template language: AST, parser, lexical environment, expressions), a layer of its own below the machines.
 */
const LAYERS = ["protocol", "language", "machines", "actors", "runtime"] as const;
type Layer = (typeof LAYERS)[number];

/** The layer of a path relative to the repository root (undefined: not a layer, e.g. test/). */
function layerOf(path: string): Layer | undefined {
  if (path.startsWith("machines/language/")) return "language";
  const top = path.split("/")[0] ?? "";
  return (LAYERS as readonly string[]).includes(top) ? (top as Layer) : undefined;
}

/** The npm packages each layer may import (node: modules are refused below actors/). */
const PACKAGES: Record<Layer, (spec: string) => boolean> = {
  protocol: (s) => s === "zod",
  language: (s) => s === "fast-xml-parser",
  machines: (s) => s === "xstate",
  actors: (s) => !s.startsWith("@nats-io/"),
  runtime: () => true,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

function imports(source: string): string[] {
  return [
    ...source.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']/g),
    ...source.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1] ?? "");
}

describe("import direction protocol ← language ← machines ← actors ← runtime", () => {
  for (const layer of LAYERS) {
    it(`${layer} imports only its own layer, lower layers and its packages`, () => {
      const violations: string[] = [];
      const dir = layer === "language" ? "machines/language" : layer;
      for (const file of files(join(root, dir))) {
        const from = relative(root, file);
        if (layerOf(from) !== layer) continue;
        for (const spec of imports(readFileSync(file, "utf8"))) {
          if (spec.startsWith(".")) {
            const target = layerOf(relative(root, join(file, "..", spec)));
            if (target === undefined || LAYERS.indexOf(target) > LAYERS.indexOf(layer))
              violations.push(`${from} imports '${spec}' (${layer} may not import ${target ?? "outside the layers"})`);
          } else if (spec.startsWith("node:")) {
            if (LAYERS.indexOf(layer) < LAYERS.indexOf("actors"))
              violations.push(`${from} imports '${spec}' (no node: modules in ${layer})`);
          } else if (!PACKAGES[layer](spec)) {
            violations.push(`${from} imports package '${spec}' (not allowed in ${layer})`);
          }
        }
      }
      expect(violations).toEqual([]);
    });
  }
});

/**
 * The import loops among `files` (paths relative to the repository root), type-only imports included: the strongly
 * connected components of more than one file (Tarjan's algorithm), each sorted, and any file that imports itself.
 */
function importLoops(files: readonly string[], importsOf: (file: string) => readonly string[]): string[][] {
  const known = new Set(files);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file) ?? 0);
    stack.push(file);
    onStack.add(file);
    for (const next of importsOf(file)) {
      if (!known.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file) ?? 0, low.get(next) ?? 0));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file) ?? 0, index.get(next) ?? 0));
    }
    if (low.get(file) !== index.get(file)) return;
    const loop: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      loop.push(member);
    } while (member !== file);
    if (loop.length > 1 || importsOf(file).includes(file)) loops.push(loop.sort());
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return loops;
}

describe("no import loops", () => {
  const sources = ["protocol", "machines", "actors", "runtime"].flatMap((top) => files(join(root, top)).map((f) => relative(root, f)));
  const importsOf = (file: string): string[] =>
    imports(readFileSync(join(root, file), "utf8"))
      .filter((spec) => spec.startsWith("."))
      .map((spec) => relative(root, join(root, file, "..", spec.replace(/\.js$/, ".ts"))));

  it("no file of protocol/, machines/, actors/ or runtime/ reaches itself through its imports (type imports included)", () => {
    expect(importLoops(sources, importsOf).map((loop) => loop.join(" → "))).toEqual([]);
  });

  it("finds a loop of two files, a longer one, and none in a chain", () => {
    const graph: Record<string, string[]> = { a: ["b"], b: ["a"], c: ["d"], d: ["e"], e: ["c", "f"], f: [], g: ["f"] };
    const found = importLoops(Object.keys(graph), (f) => graph[f] ?? []);
    expect(found).toEqual([
      ["a", "b"],
      ["c", "d", "e"],
    ]);
  });
});
