/** `dirigent templates list|validate` as a user runs them (the built CLI; no NATS needed). */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCli } from "../support/processes.js";

let dir: string;
let good: string;
let bad: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "dirigent-templates-cli-"));
  good = join(dir, "good");
  bad = join(dir, "bad");
  mkdirSync(join(good, "eval"), { recursive: true });
  mkdirSync(bad);
  writeFileSync(join(good, "summarize.xml"), '<task name="summarize"><description>Summarize {{text}}</description></task>');
  writeFileSync(
    join(good, "eval", "judge.xml"),
    '<task name="judge" subtype="evaluator"><description>Judge {{output}}</description></task>',
  );
  writeFileSync(join(bad, "ok.xml"), '<task name="ok"><description>fine</description></task>');
  writeFileSync(join(bad, "broken.xml"), "<task>\n  <description>no end</task>");
  writeFileSync(join(bad, "again.xml"), '<task name="ok"><description>twice</description></task>');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("dirigent templates", () => {
  it("list prints name, type:subtype, file and description", async () => {
    const list = startCli(["templates", "list", good]);
    expect(await list.exited).toBe(0);
    expect(list.output()).toMatch(/^NAME\s+TYPE\s+FILE\s+DESCRIPTION$/m);
    expect(list.output()).toMatch(
      new RegExp(`^judge\\s+atomic:evaluator\\s+${join(good, "eval", "judge.xml")}\\s+Judge \\{\\{output\\}\\}$`, "m"),
    );
    expect(list.output()).toMatch(/^summarize\s+atomic\s+\S+summarize\.xml\s+Summarize \{\{text\}\}$/m);
    expect(list.output()).toMatch(/2 templates in /);
  });

  it("list --json, with the directory from DIRIGENT_TEMPLATES", async () => {
    const list = startCli(["templates", "list", "--json"], { DIRIGENT_TEMPLATES: good });
    expect(await list.exited).toBe(0);
    const parsed = JSON.parse(list.output()) as { dir: string; templates: { name: string; subtype?: string }[]; errors: unknown[] };
    expect(parsed.dir).toBe(good);
    expect(parsed.templates.map((t) => [t.name, t.subtype])).toEqual([
      ["judge", "evaluator"],
      ["summarize", undefined],
    ]);
    expect(parsed.errors).toEqual([]);
  });

  it("validate exits 0 with a count for a good directory (given with --templates)", async () => {
    const validate = startCli(["templates", "validate", "--templates", good]);
    expect(await validate.exited).toBe(0);
    expect(validate.output()).toMatch(/^ok: 2 templates in 2 files/m);
  });

  it("validate exits 1 and prints file:line:col: message for each problem", async () => {
    const validate = startCli(["templates", "validate", bad]);
    expect(await validate.exited).toBe(1);
    const out = validate.output();
    expect(out).toContain(`${join(bad, "broken.xml")}:2:22: not well-formed XML: mismatched tag`);
    expect(out).toContain(`${join(bad, "ok.xml")}:1:1: duplicate template name 'ok': already defined in ${join(bad, "again.xml")}:1:1`);
    expect(out).toMatch(/2 errors; 1 valid template/);
  });

  it("list exits 1 when the library has errors, and still lists the valid templates", async () => {
    const list = startCli(["templates", "list", bad]);
    expect(await list.exited).toBe(1);
    expect(list.output()).toMatch(/^ok\s+atomic\s/m);
    expect(list.output()).toContain(`${join(bad, "broken.xml")}:2:22:`);
  });

  it("exits 2 on a missing directory and on bad usage", async () => {
    const missing = startCli(["templates", "validate", join(dir, "nowhere")]);
    const extra = startCli(["templates", "validate", good, "more"]);
    const unknown = startCli(["templates", "frobnicate"]);
    expect(await Promise.all([missing.exited, extra.exited, unknown.exited])).toEqual([2, 2, 2]);
    expect(missing.output()).toMatch(/templates directory '.*nowhere' does not exist/);
    expect(extra.output()).toMatch(/too many arguments/);
  });
});
