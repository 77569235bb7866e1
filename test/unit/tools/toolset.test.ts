import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createToolset, type Toolset } from "../../../actors/tools/toolset.js";
import type { ToolCall } from "../../../machines/handler-session.js";

let dir: string;
let tools: Toolset;
const signal = new AbortController().signal;
const call = (name: string, args: string): ToolCall => ({ id: "c1", type: "function", function: { name, arguments: args } });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-toolset-"));
  await writeFile(join(dir, "notes.md"), "# Notes\n");
  tools = await createToolset({
    workspaceRoot: dir,
    enabled: ["read_file", "list_files"],
    readMaxBytes: 1024,
    listMaxEntries: 10,
    scriptTimeoutMs: 1000,
    scriptKillGraceMs: 100,
    scriptOutputMaxBytes: 1024,
    scriptEnv: ["PATH"],
  });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("toolset", () => {
  it("offers the enabled tools with JSON Schemas of their arguments", () => {
    expect(tools.definitions.map((d) => d.function.name)).toEqual(["read_file", "list_files"]);
    expect(tools.definitions[0]?.function.parameters).toMatchObject({
      type: "object",
      properties: { path: { type: "string" }, offset: { type: "integer" } },
      required: ["path"],
      additionalProperties: false,
    });
    expect(tools.definitions[0]?.function.parameters).not.toHaveProperty("$schema");
  });

  it("runs a well-formed call", async () => {
    expect(await tools.run(call("read_file", '{"path":"notes.md"}'), signal)).toEqual({ malformed: false, content: "# Notes\n" });
  });

  it("answers malformed calls with an error, marked malformed", async () => {
    const badJson = await tools.run(call("read_file", '{"path": "notes.md"'), signal);
    expect(badJson).toMatchObject({ malformed: true });
    expect(badJson.content).toMatch(/^error: the arguments of 'read_file' are not valid JSON/);
    const unknown = await tools.run(call("run_script", '{"argv":["ls"]}'), signal);
    expect(unknown).toEqual({ malformed: true, content: "error: no tool named 'run_script'; available: read_file, list_files" });
    const wrongType = await tools.run(call("read_file", '{"path": 42}'), signal);
    expect(wrongType).toMatchObject({ malformed: true });
    expect(wrongType.content).toMatch(/invalid arguments for 'read_file': path: /);
  });

  it("answers a failing tool with an error that is not counted as malformed", async () => {
    expect(await tools.run(call("read_file", '{"path":"../etc/passwd"}'), signal)).toEqual({
      malformed: false,
      content: "error: path '../etc/passwd' is outside the workspace",
    });
  });
});
