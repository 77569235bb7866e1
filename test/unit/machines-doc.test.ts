import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../runtime/cli/common.js";
import { exportFiles, exportText, parseExportFormat } from "../../runtime/cli/machines.js";
import { machineGraph } from "../../runtime/charts/graph.js";
import { toMermaid } from "../../runtime/charts/mermaid.js";
import { machines } from "../../runtime/charts/registry.js";

const doc = join(import.meta.dirname, "../../docs/machines.md");
const readme = join(import.meta.dirname, "../../README.md");

describe("docs/machines.md", () => {
  it("matches the machines (run 'dirigent machines export --format markdown > docs/machines.md' after changing one)", () => {
    const stored = readFileSync(doc, "utf8");
    expect(stored, "docs/machines.md is stale: regenerate it with 'dirigent machines export --format markdown > docs/machines.md'").toBe(
      exportText("markdown"),
    );
  });

  it("has a section and a Mermaid chart for every registered machine", () => {
    const stored = readFileSync(doc, "utf8");
    for (const { name, machine } of machines) {
      expect(stored).toContain(`## ${name}\n`);
      expect(stored).toContain("```mermaid\n" + toMermaid(machineGraph(machine)));
    }
  });
});

describe("README.md", () => {
  it("shows the current chart of the task machine in '## Machines as diagrams' (copy it from 'dirigent machines export --out DIR', DIR/task.mmd)", () => {
    const text = readFileSync(readme, "utf8");
    const start = text.indexOf("\n## Machines as diagrams\n");
    expect(start).toBeGreaterThanOrEqual(0);
    const section = text.slice(start + 1, text.indexOf("\n## ", start + 1));
    const charts = [...section.matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(charts).toHaveLength(1);
    expect(charts[0], "README.md's task chart is stale").toBe(exportFiles("mermaid")["task.mmd"]);
  });
});

describe("dirigent machines export", () => {
  it("accepts mermaid, json and markdown and rejects anything else with a usage error", () => {
    expect(parseExportFormat("mermaid")).toBe("mermaid");
    expect(parseExportFormat("json")).toBe("json");
    expect(() => parseExportFormat("svg")).toThrow(UsageError);
    expect(() => parseExportFormat("svg")).toThrow("--format 'svg': expected one of mermaid, json, markdown");
  });

  it("writes one <name>.mmd or <name>.json per machine", () => {
    const names = machines.map((m) => m.name).sort();
    const mermaid = exportFiles("mermaid");
    expect(Object.keys(mermaid).sort()).toEqual(names.map((n) => `${n}.mmd`));
    expect(mermaid["task.mmd"]).toBe(toMermaid(machineGraph(machines.find((m) => m.name === "task")!.machine)));
    const json = exportFiles("json");
    expect(Object.keys(json).sort()).toEqual(names.map((n) => `${n}.json`));
    expect(JSON.parse(json["task.json"]!)).toEqual(machineGraph(machines.find((m) => m.name === "task")!.machine));
  });

  it("prints every machine to stdout, Mermaid charts headed by their names and JSON keyed by name", () => {
    const text = exportText("mermaid");
    for (const { name } of machines) expect(text).toContain(`%% ${name}\nstateDiagram-v2\n`);
    expect(Object.keys(JSON.parse(exportText("json")) as object)).toEqual(machines.map((m) => m.name));
  });
});
