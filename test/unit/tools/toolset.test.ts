import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createToolset, type Toolset } from "../../../runtime/tools/toolset.js";
import type { ToolCall } from "../../../machines/handler/session.js";

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

describe("template commands and the model's run_script are separate switches", () => {
  const base = {
    workspaceRoot: "",
    readMaxBytes: 1024,
    listMaxEntries: 10,
    scriptTimeoutMs: 5000,
    scriptKillGraceMs: 100,
    scriptOutputMaxBytes: 1024,
    scriptEnv: ["PATH"],
  };

  it("refuses every template command when DIRIGENT_COMMANDS is empty, even with run_script on, naming the program and the setting", async () => {
    const set = await createToolset({ ...base, workspaceRoot: dir, enabled: ["run_script"] });
    expect(await set.script({ argv: ["sh", "-c", "echo hi"] }, signal)).toEqual({
      error:
        "template commands are off: program 'sh' may not run (set DIRIGENT_COMMANDS to the programs templates may run, e.g. DIRIGENT_COMMANDS=python3,pytest)",
    });
    // The model's own tool still runs.
    expect((await set.run(call("run_script", '{"argv":["sh","-c","echo model"]}'), signal)).content).toBe(
      "exit code 0\n--- stdout ---\nmodel\n\n--- stderr ---\n",
    );
  });

  it("runs exactly the listed programs: a name, not a path to a file of that name", async () => {
    const set = await createToolset({ ...base, workspaceRoot: dir, enabled: ["read_file"], commands: ["sh", "/usr/bin/env"] });
    expect(set.definitions.map((d) => d.function.name)).toEqual(["read_file"]);
    expect(await set.script({ argv: ["sh", "-c", "echo hi"] }, signal)).toMatchObject({ outcome: { exitCode: 0, stdout: "hi\n" } });
    expect(await set.script({ argv: ["/usr/bin/env", "true"] }, signal)).toMatchObject({ outcome: { exitCode: 0 } });
    expect(await set.script({ argv: ["./sh"] }, signal)).toEqual({
      error: "program './sh' is not allowed for template commands (DIRIGENT_COMMANDS=sh,/usr/bin/env; add it there to allow it)",
    });
    expect(await set.script({ argv: ["env"] }, signal)).toMatchObject({ error: expect.stringMatching(/program 'env' is not allowed/) });
    expect(await set.script({ argv: ["sh", "-c", "true"], env: { PATH: dir } }, signal)).toEqual({
      error: expect.stringMatching(/may not set PATH/),
    });
  });

  it("masks the secret values it knows in program output and tool answers", async () => {
    await writeFile(join(dir, "leak.txt"), "key=sk-test-secret-value-1\n");
    const set = await createToolset({
      ...base,
      workspaceRoot: dir,
      enabled: ["read_file", "run_script"],
      commands: ["cat"],
      secrets: ["sk-test-secret-value-1"],
    });
    expect(await set.run(call("read_file", '{"path":"leak.txt"}'), signal)).toEqual({ malformed: false, content: "key=[redacted]\n" });
    expect((await set.run(call("run_script", '{"argv":["cat","leak.txt"]}'), signal)).content).toContain("key=[redacted]\n");
    expect(await set.script({ argv: ["cat", "leak.txt"] }, signal)).toMatchObject({ outcome: { stdout: "key=[redacted]\n" } });
  });
});

describe("the sandbox of a toolset", () => {
  const base = {
    readMaxBytes: 1024,
    listMaxEntries: 10,
    scriptTimeoutMs: 5000,
    scriptKillGraceMs: 100,
    scriptOutputMaxBytes: 1024,
    scriptEnv: ["PATH"],
  };
  const logged = () => {
    const lines: { level: string; msg: string }[] = [];
    const at = (level: string) => (_obj: object, msg?: string) => void lines.push({ level, msg: msg ?? "" });
    return { lines, log: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
  };

  it("logs an error at start and refuses every program, saying how to install bubblewrap, when bwrap is missing", async () => {
    const { lines, log } = logged();
    const set = await createToolset(
      {
        ...base,
        workspaceRoot: dir,
        enabled: ["run_script"],
        commands: ["sh"],
        sandbox: { mode: "bwrap", network: false, readOnly: [], hidden: [], bwrapPath: "/nonexistent/bwrap" },
      },
      log,
    );
    expect(lines).toEqual([
      {
        level: "error",
        msg: expect.stringMatching(
          /no sandbox to run programs in: '\/nonexistent\/bwrap' is not installed.*apt-get install bubblewrap.*every program will be refused/,
        ),
      },
    ]);
    expect(await set.script({ argv: ["sh", "-c", "true"] }, signal)).toEqual({
      error: expect.stringMatching(/apt-get install bubblewrap/),
    });
    expect((await set.run(call("run_script", '{"argv":["sh"]}'), signal)).content).toMatch(/^error: no sandbox to run programs in/);
  });

  it("warns once at start when the operator runs programs unsandboxed, and runs them", async () => {
    const { lines, log } = logged();
    const set = await createToolset(
      {
        ...base,
        workspaceRoot: dir,
        enabled: [],
        commands: ["sh"],
        sandbox: { mode: "unsandboxed", network: false, readOnly: [], hidden: [] },
      },
      log,
    );
    expect(lines).toEqual([
      { level: "warn", msg: expect.stringMatching(/DIRIGENT_SANDBOX=unsandboxed: programs .* run WITHOUT isolation/) },
    ]);
    expect(await set.script({ argv: ["sh", "-c", "echo $$"] }, signal)).toMatchObject({ outcome: { exitCode: 0 } });
    expect(set.sandbox).toEqual({ mode: "unsandboxed", unavailable: undefined });
  });

  it("checks nothing and logs nothing when no program may run", async () => {
    const { lines, log } = logged();
    const set = await createToolset(
      {
        ...base,
        workspaceRoot: dir,
        enabled: ["read_file"],
        sandbox: { mode: "bwrap", network: false, readOnly: [], hidden: [], bwrapPath: "/nonexistent/bwrap" },
      },
      log,
    );
    expect(lines).toEqual([]);
    expect(await set.script({ argv: ["sh"] }, signal)).toEqual({ error: expect.stringMatching(/template commands are off/) });
  });
});
