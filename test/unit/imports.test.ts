import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

/** What each folder may import: other folders of the repo, and npm packages. */
const RULES: Record<string, { folders: string[]; packages: (spec: string) => boolean }> = {
  protocol: { folders: ["protocol"], packages: (s) => s === "zod" },
  machines: { folders: ["machines", "protocol"], packages: (s) => s === "xstate" },
  actors: { folders: ["actors", "machines", "protocol"], packages: (s) => !s.startsWith("@nats-io/") },
  runtime: { folders: ["runtime", "actors", "machines", "protocol"], packages: () => true },
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

function imports(source: string): string[] {
  return [...source.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']/g), ...source.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] ?? "");
}

describe("import direction protocol ← machines ← actors ← runtime", () => {
  for (const [folder, rule] of Object.entries(RULES)) {
    it(`${folder}/ imports only what it may`, () => {
      const violations: string[] = [];
      for (const file of files(join(root, folder))) {
        for (const spec of imports(readFileSync(file, "utf8"))) {
          if (spec.startsWith(".")) {
            const target = relative(root, join(file, "..", spec)).split("/")[0] ?? "";
            if (!rule.folders.includes(target)) violations.push(`${relative(root, file)} imports '${spec}' (${folder}/ may not import ${target}/)`);
          } else if (spec.startsWith("node:")) {
            if (folder === "protocol" || folder === "machines") violations.push(`${relative(root, file)} imports '${spec}' (no node: modules in ${folder}/)`);
          } else if (!rule.packages(spec)) {
            violations.push(`${relative(root, file)} imports package '${spec}' (not allowed in ${folder}/)`);
          }
        }
      }
      expect(violations).toEqual([]);
    });
  }
});
