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

describe("one concern per folder", () => {
  it("no folder of protocol/, machines/, actors/ or runtime/ holds more than 15 source files at its root", () => {
    const crowded: string[] = [];
    const visit = (dir: string): void => {
      const names = readdirSync(dir);
      const sources = names.filter((n) => n.endsWith(".ts"));
      if (sources.length > 15 && relative(root, dir) !== "protocol") crowded.push(`${relative(root, dir)}: ${sources.length}`);
      for (const n of names) if (statSync(join(dir, n)).isDirectory()) visit(join(dir, n));
    };
    for (const top of ["machines", "actors", "runtime"]) visit(join(root, top));
    expect(crowded).toEqual([]);
  });

  it("no source file of protocol/, machines/, actors/, runtime/ or test/ is longer than 400 lines", () => {
    const long: string[] = [];
    for (const top of ["protocol", "machines", "actors", "runtime", "test"]) {
      for (const file of files(join(root, top))) {
        const lines = readFileSync(file, "utf8").split("\n").length - 1;
        if (lines > 400) long.push(`${relative(root, file)}: ${lines} lines`);
      }
    }
    expect(long).toEqual([]);
  });
});
