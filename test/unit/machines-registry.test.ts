/**
 * Every machine defined in machines/ is registered in runtime/charts/registry.ts, with the file that defines it, so that it is
 * drawn by the inspector, exported by `dirigent machines export` and shown in docs/machines.md. The expectations come
 * from the files present: a new machine file fails this test until it is registered.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { StateMachine } from "xstate";
import { machines } from "../../runtime/charts/registry.js";

const dir = join(import.meta.dirname, "../../machines");
/** Every .ts file under `path`, relative to machines/. */
function sources(path: string): string[] {
  return readdirSync(path).flatMap((name) => {
    const full = join(path, name);
    return statSync(full).isDirectory() ? sources(full) : name.endsWith(".ts") ? [relative(dir, full)] : [];
  });
}
/** The files of machines/ that define a machine (`createMachine(…)`, usually `setup({…}).createMachine(…)`). */
const defining = sources(dir)
  .filter((file) => /\bcreateMachine\s*\(/.test(readFileSync(join(dir, file), "utf8")))
  .sort();

describe("the machine registry (runtime/charts/registry.ts)", () => {
  it("finds machine files to check", () => {
    expect(defining).toContain("director/task.ts");
  });

  it("registers every file of machines/ that defines a machine", () => {
    const registered = new Set(machines.map((m) => m.file));
    const missing = defining.filter((file) => !registered.has(file));
    expect(missing, `machines defined in machines/ but missing from runtime/charts/registry.ts: ${missing.join(", ")}`).toEqual([]);
  });

  it("gives each registered machine a file of machines/ that defines it, and a name of its own", () => {
    const files = new Set(defining);
    expect(machines.map((m) => m.file).filter((file) => !files.has(file))).toEqual([]);
    expect(new Set(machines.map((m) => m.name)).size).toBe(machines.length);
  });

  it("registers the machines those files export, not copies", async () => {
    const unregistered: string[] = [];
    for (const file of defining) {
      const module = (await import(pathToFileURL(join(dir, file)).href)) as Record<string, unknown>;
      for (const [name, value] of Object.entries(module)) {
        if (value instanceof StateMachine && !machines.some((m) => m.machine === value)) unregistered.push(`${file}: ${name}`);
      }
    }
    expect(unregistered).toEqual([]);
  });
});
