/** The template library as MCP tools and A2A skills: the input schema from a template's parameters or placeholders. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadLibrary } from "../../actors/library/library.js";
import { libraryTools, placeholderInputs } from "../../runtime/protocols/library-tools.js";
import { checkArguments } from "../../runtime/protocols/task-calls.js";

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
