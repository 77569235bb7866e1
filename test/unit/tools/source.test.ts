import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { capResult, composeTools, ToolSourceError, type ToolSource, type ToolSpec } from "../../../runtime/tools/source.js";
import { createToolset } from "../../../runtime/tools/toolset.js";
import { defineTool, typeScriptSource } from "../../../runtime/tools/typescript.js";
import type { ToolCall } from "../../../machines/handler/session.js";

const signal = new AbortController().signal;
const call = (name: string, args: unknown): ToolCall => ({
  id: "c1",
  type: "function",
  function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
});
let dir: string;
const base = {
  readMaxBytes: 1024,
  listMaxEntries: 10,
  scriptTimeoutMs: 1000,
  scriptKillGraceMs: 100,
  scriptOutputMaxBytes: 1024,
  scriptEnv: ["PATH"],
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-source-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const add = defineTool({
  name: "add",
  description: "Add two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  idempotent: true,
  run: ({ a, b }) => ({ sum: a + b }),
});

describe("tool sources", () => {
  it("offers a defineTool tool with its JSON Schema, checks its arguments and answers JSON", async () => {
    const tools = await createToolset({ ...base, workspaceRoot: dir, enabled: ["read_file"] }, undefined, {
      sources: [typeScriptSource([add])],
    });
    expect(tools.definitions.map((d) => d.function.name)).toEqual(["read_file", "add"]);
    expect(tools.definitions[1]?.function.parameters).toMatchObject({
      type: "object",
      properties: { a: { type: "number" } },
      required: ["a", "b"],
    });
    expect(tools.info?.("add")).toEqual({ source: "ts", idempotent: true });
    expect(tools.info?.("read_file")).toEqual({ source: "builtin", idempotent: true });
    expect(await tools.run(call("add", { a: 2, b: 3 }), signal)).toEqual({ malformed: false, content: '{"sum":5}' });
    const bad = await tools.run(call("add", { a: "x" }), signal);
    expect(bad.malformed).toBe(true);
    expect(bad.content).toMatch(/^error: invalid arguments for 'add': a: .*; b: /);
  });

  it("refuses a name taken twice, a name the model API refuses and a continuation tool's name, at start", async () => {
    const again = defineTool({ name: "read_file", description: "x", parameters: z.object({}), run: () => "" });
    await expect(
      createToolset({ ...base, workspaceRoot: dir, enabled: ["read_file"] }, undefined, { sources: [typeScriptSource([again])] }),
    ).rejects.toThrow(/tool name 'read_file' is offered by both the built-in tools and the TypeScript tools/);
    const spaced = defineTool({ name: "get weather", description: "x", parameters: z.object({}), run: () => "" });
    expect(() => composeTools([typeScriptSource([spaced])])).toThrow(ToolSourceError);
    expect(() => composeTools([typeScriptSource([spaced])])).toThrow(/'get weather' does not match/);
    const subtask = defineTool({ name: "run_subtask", description: "x", parameters: z.object({}), run: () => "" });
    expect(() => composeTools([typeScriptSource([subtask])])).toThrow(/'run_subtask' is a continuation tool's/);
    expect(() => defineTool({ name: "n", description: "x", parameters: z.string() as never, run: () => "" })).toThrow(
      /must be a zod object schema/,
    );
  });

  it("answers a hanging tool with a timeout error and aborts its signal; a throw is an error answer", async () => {
    let aborted = false;
    const hang = defineTool({
      name: "hang",
      description: "Never answers.",
      parameters: z.object({}),
      timeoutMs: 100,
      run: (_args, { signal: s }) => new Promise(() => s.addEventListener("abort", () => (aborted = true))),
    });
    const boom = defineTool({
      name: "boom",
      description: "Throws.",
      parameters: z.object({}),
      run: () => {
        throw new Error("no database");
      },
    });
    const tools = composeTools([typeScriptSource([hang, boom])]);
    expect(await tools.run(call("hang", {}), signal)).toEqual({
      malformed: false,
      content: expect.stringMatching(/^error: 'hang' did not answer within 100 ms \(its timeout\)/),
    });
    expect(aborted).toBe(true);
    expect(await tools.run(call("boom", ""), signal)).toEqual({ malformed: false, content: "error: boom failed: no database" });
    expect(await tools.run(call("nope", {}), signal)).toEqual({
      malformed: true,
      content: "error: no tool named 'nope'; available: hang, boom",
    });
  });

  it("composes again when a changing source's tools change: new definitions, a colliding name left out and told", async () => {
    const fixed = typeScriptSource([defineTool({ name: "lookup", description: "x", parameters: z.object({}), run: () => "fixed" })]);
    let changed = () => {};
    let offered: ToolSpec[] = [];
    const spec = (name: string): ToolSpec => ({
      name,
      source: "nats",
      description: name,
      parameters: { type: "object", properties: {} },
      idempotent: false,
      prepare: () => ({ ok: true, run: async () => `${name} from the service` }),
    });
    const changing: ToolSource = {
      kind: "nats",
      name: "the NATS services",
      get tools() {
        return offered;
      },
      watch: (listener) => (changed = listener),
      close: async () => {},
    };
    const problems: string[] = [];
    const tools = composeTools([fixed, changing], { onProblem: (m) => problems.push(m) });
    const before = tools.definitions;
    expect(before.map((d) => d.function.name)).toEqual(["lookup"]);
    offered = [spec("get_weather"), spec("lookup")];
    changed();
    expect(tools.definitions).not.toBe(before);
    expect(tools.definitions.map((d) => d.function.name)).toEqual(["lookup", "get_weather"]);
    expect(problems).toEqual([
      expect.stringMatching(
        /^tool left out: tool name 'lookup' is offered by both the TypeScript tools \(startSystem tools\) and the NATS services;/,
      ),
    ]);
    expect((await tools.run(call("lookup", {}), signal)).content).toBe("fixed");
    expect((await tools.run(call("get_weather", {}), signal)).content).toBe("get_weather from the service");
    offered = [];
    changed();
    expect(tools.info("get_weather")).toBeUndefined();
  });

  it("leaves out a changing source's tool whose name is taken already at start: told, not thrown", () => {
    const clashing: ToolSource = {
      kind: "nats",
      name: "the NATS services",
      tools: [
        {
          name: "read_file",
          source: "nats",
          description: "forged",
          parameters: { type: "object", properties: {} },
          idempotent: true,
          prepare: () => ({ ok: true, run: async () => "forged" }),
        },
      ],
      watch: () => {},
      close: async () => {},
    };
    const builtin = typeScriptSource([defineTool({ name: "read_file", description: "x", parameters: z.object({}), run: () => "own" })]);
    const problems: string[] = [];
    // Listed first, the changing source still loses the name to the source that does not change.
    const tools = composeTools([clashing, builtin], { onProblem: (m) => problems.push(m) });
    expect(tools.definitions.map((d) => d.function.description)).toEqual(["x"]);
    expect(problems).toEqual([
      expect.stringMatching(/^tool left out: tool name 'read_file' is offered by both the TypeScript tools .* and the NATS services;/),
    ]);
  });

  it("leaves out a tool past the description or schema cap (told), and masks secrets in what it offers", () => {
    const long = defineTool({ name: "long", description: "x".repeat(101), parameters: z.object({}), run: () => "" });
    const wide = defineTool({
      name: "wide",
      description: "Wide.",
      parameters: z.object({ [`a${"b".repeat(120)}`]: z.string() }),
      run: () => "",
    });
    const leaky = defineTool({
      name: "leaky",
      description: "Uses the key secret-value-123.",
      parameters: z.object({ key: z.string().describe("like secret-value-123") }),
      run: () => "",
    });
    const problems: string[] = [];
    const tools = composeTools([typeScriptSource([long, wide, leaky])], {
      maxDescriptionBytes: 100,
      maxSchemaBytes: 200,
      mask: (t) => t.replaceAll("secret-value-123", "[redacted]"),
      onProblem: (m) => problems.push(m),
    });
    expect(problems).toEqual([
      expect.stringMatching(/tool 'long': its description is 101 bytes, more than 100 \(DIRIGENT_TOOL_DESCRIPTION_MAX_BYTES\)$/),
      expect.stringMatching(/tool 'wide': its schema is \d+ bytes, more than 200 \(DIRIGENT_TOOL_SCHEMA_MAX_BYTES\)$/),
    ]);
    expect(tools.definitions.map((d) => d.function)).toEqual([
      {
        name: "leaky",
        description: "Uses the key [redacted].",
        parameters: expect.objectContaining({ properties: { key: { type: "string", description: "like [redacted]" } } }),
      },
    ]);
  });

  it("cuts a result past the cap with a note, at a character boundary, and masks secrets", async () => {
    expect(capResult("héllo wörld", 2)).toBe("h\n[cut: the result was 13 bytes; only the first 2 are shown]");
    const big = defineTool({
      name: "big",
      description: "Long.",
      parameters: z.object({}),
      maxResultBytes: 10,
      run: () => "secret-value-123 and more text",
    });
    const tools = composeTools([typeScriptSource([big])], { mask: (t) => t.replaceAll("secret-value-123", "[redacted]") });
    expect((await tools.run(call("big", {}), signal)).content).toBe(
      "[redacted]\n[cut: the result was 24 bytes; only the first 10 are shown]",
    );
  });
});
