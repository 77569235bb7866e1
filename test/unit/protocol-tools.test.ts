/** The template library as MCP tools and A2A skills: the input schema from a template's parameters or placeholders, and
 * which template and inputs an A2A message asks for. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadLibrary } from "../../actors/library/library.js";
import { libraryTools, placeholderInputs } from "../../runtime/protocols/library-tools.js";
import { checkArguments } from "../../runtime/protocols/task-calls.js";
import { dataPart, taskOfMessage, textPart, TEXT_TASK_XML } from "../../runtime/protocols/a2a-executor.js";
import { Role, type Message, type Part } from "@a2a-js/sdk";

const dir = mkdtempSync(join(tmpdir(), "dirigent-protocol-tools-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("library templates as tools", () => {
  it("reads a template's inputs from its placeholders, once each, leaving out what the runtime binds", () => {
    expect(placeholderInputs("{{a}} {{ b.c }} {{a}} {{step_results[0]}} {{f(x)}} {{undefined:z}} {{d[2].e}}")).toEqual(["a", "b", "d"]);
  });

  it("gives a function template its declared parameters and any other template its placeholders, all required", async () => {
    writeFileSync(
      join(dir, "shout.xml"),
      '<task name="shout" parameters="word"><description>Shout {{word}} at {{place}}</description></task>',
    );
    writeFileSync(join(dir, "plain.xml"), '<task name="plain"><description>Compare {{left}} with {{right}}</description></task>');
    const { library, errors } = await loadLibrary(dir, { required: true });
    expect(errors).toEqual([]);
    const tools = libraryTools(library);
    const plain = tools.find((t) => t.name === "plain");
    expect(plain?.inputSchema).toEqual({
      type: "object",
      properties: {
        left: { type: "string", description: "the value of {{left}}" },
        right: { type: "string", description: "the value of {{right}}" },
      },
      required: ["left", "right"],
      additionalProperties: false,
    });
    const shout = tools.find((t) => t.name === "shout");
    expect(shout?.params.map((p) => p.name)).toEqual(["word"]);
    expect(plain && checkArguments(plain, { left: 1 })).toBe("plain: missing input 'right'");
    expect(plain && checkArguments(plain, { left: 1, right: 2, up: 3 })).toMatch(/^plain: unknown input 'up' \(inputs: left, right\)$/);
    expect(plain && checkArguments(plain, { left: 1, right: 2 })).toBeUndefined();
  });
});

describe("an A2A message as a task", () => {
  const tools = new Map(
    [
      { name: "one", params: [{ name: "text", required: true }] },
      {
        name: "two",
        params: [
          { name: "a", required: true },
          { name: "b", required: false },
        ],
      },
    ].map((t) => [
      t.name,
      { ...t, description: "", kind: "atomic", inputSchema: { type: "object" as const }, xml: `<task name="${t.name}"/>` },
    ]),
  );
  const message = (parts: Part[], metadata: Record<string, unknown> = {}): Message => ({
    messageId: "m",
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts,
    metadata,
    extensions: [],
    referenceTaskIds: [],
  });

  it("runs the text as a task without a skill, the named template with its inputs, its one input from the text", () => {
    expect(taskOfMessage(message([textPart("hi")]), tools)).toEqual({ xml: TEXT_TASK_XML, inputs: { request: "hi" } });
    expect(taskOfMessage(message([textPart("hi")], { skill: "one" }), tools)).toEqual({
      xml: '<task name="one"/>',
      inputs: { text: "hi" },
    });
    expect(taskOfMessage(message([dataPart({ inputs: { a: 1 } })], { skill: "two" }), tools)).toEqual({
      xml: '<task name="two"/>',
      inputs: { a: 1 },
    });
    expect(taskOfMessage(message([dataPart({ skill: "two", a: 2, b: 3 })]), tools)).toEqual({
      xml: '<task name="two"/>',
      inputs: { a: 2, b: 3 },
    });
  });

  it("names what is wrong: no text, an unknown skill, inputs that do not fit", () => {
    expect(taskOfMessage(message([]), tools)).toEqual({ problem: "the message has no text and names no skill (metadata.skill)" });
    expect(taskOfMessage(message([textPart("x")], { skill: "three" }), tools)).toEqual({ problem: "no skill 'three' (skills: one, two)" });
    expect(taskOfMessage(message([textPart("x")], { skill: "two" }), tools)).toEqual({ problem: "two: missing input 'a'" });
  });
});
