/**
 * The Handler's choice of a session's tools (actors/handler/settings.ts), `DIRIGENT_TOOLS` read as built-ins and a
 * default selection (runtime/tools/toolset.ts), and the fallback of models when one is unavailable.
 */
import { describe, expect, it } from "vitest";
import { missingToolsMessage, toolChoice } from "../../../actors/handler/settings.js";
import { modelUnavailable, withFallback } from "../../../actors/handler/model-call.js";
import type { Toolset } from "../../../actors/handler/toolset.js";
import { ModelCallError } from "../../../actors/model.js";
import { toolSelection } from "../../../runtime/tools/toolset.js";
import { loadConfig } from "../../../runtime/config.js";

const toolset = (names: string[]): Toolset => ({
  definitions: names.map((name) => ({ type: "function", function: { name, description: name, parameters: { type: "object" } } })),
  run: async () => ({ malformed: false, content: "" }),
  script: async () => ({ error: "none" }),
  sandbox: { mode: "bwrap", unavailable: undefined },
});
const names = (chosen: ReturnType<ReturnType<typeof toolChoice>>) =>
  "missing" in chosen ? chosen : chosen.definitions.map((d) => d.function.name);

describe("toolChoice", () => {
  const tools = toolset(["read_file", "fs__read", "fs__write", "get_weather"]);

  it("offers every tool without a default, the default's selection otherwise, and a task's own list over both", () => {
    expect(names(toolChoice(tools, undefined)(undefined, []))).toEqual(["read_file", "fs__read", "fs__write", "get_weather"]);
    const unmatched: string[][] = [];
    expect(names(toolChoice(tools, ["fs__*", "nowhere"], (p) => unmatched.push(p))(undefined, []))).toEqual(["fs__read", "fs__write"]);
    expect(unmatched).toEqual([["nowhere"]]);
    expect(names(toolChoice(tools, ["fs__*"])(["get_weather"], ["subtask"]))).toEqual(["get_weather", "run_subtask"]);
    expect(names(toolChoice(tools, undefined)([], []))).toEqual([]);
  });

  it("names what a task's list selects nothing of; the same choice is the same array (its token count is kept)", () => {
    const choose = toolChoice(tools, undefined);
    expect(choose(["read_file", "db__*", "search"], [])).toEqual({ missing: ["db__*", "search"] });
    expect(choose(["fs__*"], [])).toBe(choose(["fs__*"], []));
    expect(missingToolsMessage(["db__*"], tools)).toBe(
      "the task's <tools> names a tool this Handler does not have: 'db__*' (its tools: read_file, fs__read, fs__write, get_weather)",
    );
    expect(missingToolsMessage(["weather"], tools, "off")).toBe(
      "the task's <tools> names a tool this Handler does not have: 'weather' (its tools: read_file, fs__read, fs__write, get_weather); if it is a tool of a NATS service, this Handler offers those only with DIRIGENT_NATS_TOOLS=on",
    );
  });
});

describe("DIRIGENT_TOOLS", () => {
  it("takes names and globs, separated by commas; anything else is refused naming the variable", () => {
    expect(loadConfig({}, { DIRIGENT_TOOLS: "read_file, fs__*,get_weather" }).tools).toEqual(["read_file", "fs__*", "get_weather"]);
    expect(loadConfig({}, {}).tools).toEqual(["read_file", "list_files"]);
    expect(() => loadConfig({}, { DIRIGENT_TOOLS: "read_file,fs/read" })).toThrow(/environment variable DIRIGENT_TOOLS/);
  });

  it("built-in names only: those built-ins, every other tool by default (the form of before)", () => {
    expect(toolSelection(["read_file", "run_script"])).toEqual({ enabled: ["read_file", "run_script"] });
  });

  it("with globs or other names: the built-ins it names, and itself as the default selection", () => {
    expect(toolSelection(["read_file", "fs__*", "get_weather"])).toEqual({
      enabled: ["read_file"],
      defaultTools: ["read_file", "fs__*", "get_weather"],
    });
    // A glob never switches a built-in on: run_script stays opt-in by its name.
    expect(toolSelection(["*"]).enabled).toEqual([]);
  });
});

describe("model fallback", () => {
  const failure = (status: number | undefined) => new ModelCallError(`failed ${status}`, 1, status);

  it.each([
    [404, true],
    [403, true],
    [429, true],
    [500, true],
    [503, true],
    [undefined, true],
    [400, false],
    [401, false],
    [422, false],
  ])("status %s: unavailable %s", (status, unavailable) => {
    expect(modelUnavailable(failure(status))).toBe(unavailable);
  });

  it("tries the models in order while they are unavailable, and stops at a content error or the last model", async () => {
    const switches: string[] = [];
    const called: string[] = [];
    const answer = await withFallback(
      "a",
      ["b", "a", "c"],
      async (model) => {
        called.push(model);
        if (model !== "c") throw failure(model === "a" ? 404 : 503);
        return `answer of ${model}`;
      },
      (from, to) => switches.push(`${from}→${to}`),
      () => false,
    );
    expect(answer).toBe("answer of c");
    expect(called).toEqual(["a", "b", "c"]);
    expect(switches).toEqual(["a→b", "b→c"]);
    await expect(
      withFallback(
        "a",
        ["b"],
        async () => Promise.reject(failure(400)),
        () => undefined,
        () => false,
      ),
    ).rejects.toThrow("failed 400");
    await expect(
      withFallback(
        "a",
        ["b"],
        async () => Promise.reject(failure(404)),
        () => undefined,
        () => false,
      ),
    ).rejects.toThrow("failed 404");
    // A cancelled session does not go on to the next model.
    const tried: string[] = [];
    await expect(
      withFallback(
        "a",
        ["b"],
        async (m) => (tried.push(m), Promise.reject(failure(503))),
        () => undefined,
        () => true,
      ),
    ).rejects.toThrow("failed 503");
    expect(tried).toEqual(["a"]);
  });
});
