/**
 * Every machine defined in machines/ is registered in runtime/machines.ts, under its file's base name, so that it is
 * drawn by the inspector, exported by `dirigent machines export` and shown in docs/machines.md. The expectations come
 * from the files present: a new machine file fails this test until it is registered.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { StateMachine } from "xstate";
import { machines } from "../../runtime/machines.js";

const dir = join(import.meta.dirname, "../../machines");
/** The files of machines/ that define a machine (`createMachine(…)`, usually `setup({…}).createMachine(…)`). */
const defining = readdirSync(dir)
  .filter((file) => file.endsWith(".ts"))
  .filter((file) => /\bcreateMachine\s*\(/.test(readFileSync(join(dir, file), "utf8")))
  .sort();

describe("the machine registry (runtime/machines.ts)", () => {
  it("finds machine files to check", () => {
    expect(defining).toContain("task.ts");
  });

  it("registers every machines/*.ts file that defines a machine, under the file's base name", () => {
    const registered = new Set(machines.map((m) => m.name));
    const missing = defining.map((file) => file.slice(0, -3)).filter((name) => !registered.has(name));
    expect(missing, `machines defined in machines/ but missing from runtime/machines.ts: ${missing.join(", ")}`).toEqual([]);
  });

  it("names each registered machine after a file of machines/ that defines it", () => {
    const files = new Set(defining.map((file) => file.slice(0, -3)));
    expect(machines.map((m) => m.name).filter((name) => !files.has(name))).toEqual([]);
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
