import { execFileSync, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { editWorkspaceFile, writeWorkspaceFile } from "../../../runtime/tools/write-files.js";
import { createToolset } from "../../../runtime/tools/toolset.js";
import { openWorkspace, ToolError, type Workspace } from "../../../runtime/tools/workspace.js";

let dir: string;
let outside: string;
let ws: Workspace;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-ws-write-"));
  outside = await mkdtemp(join(tmpdir(), "dirigent-outside-write-"));
  await writeFile(join(outside, "secret.txt"), "top secret");
  await mkdir(join(dir, "src"));
  await symlink(join(outside, "secret.txt"), join(dir, "escape.txt"));
  await symlink(outside, join(dir, "escape-dir"));
  await symlink(join(outside, "new.txt"), join(dir, "dangling.txt"));
  ws = await openWorkspace(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

const secretUntouched = async () => {
  expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("top secret");
  expect(execFileSync("ls", [outside], { encoding: "utf8" }).trim()).toBe("secret.txt");
};

describe("write_file", () => {
  it("creates a file, creating missing directories, and replaces it whole", async () => {
    expect(await writeWorkspaceFile(ws, { path: "out/deep/note.md", content: "first version, long" })).toBe(
      "wrote 19 bytes to out/deep/note.md",
    );
    await writeWorkspaceFile(ws, { path: "out/deep/note.md", content: "second" });
    expect(await readFile(join(dir, "out/deep/note.md"), "utf8")).toBe("second");
  });

  it("refuses '..' and absolute paths outside the workspace", async () => {
    await expect(writeWorkspaceFile(ws, { path: "../x.txt", content: "x" })).rejects.toThrow(/outside the workspace/);
    await expect(writeWorkspaceFile(ws, { path: join(outside, "x.txt"), content: "x" })).rejects.toThrow(/outside the workspace/);
    await expect(writeWorkspaceFile(ws, { path: ".", content: "x" })).rejects.toBeInstanceOf(ToolError);
    await secretUntouched();
  });

  it("refuses symlinks that lead out: to a file, through a directory, dangling", async () => {
    await expect(writeWorkspaceFile(ws, { path: "escape.txt", content: "pwned" })).rejects.toThrow(/outside the workspace/);
    await expect(writeWorkspaceFile(ws, { path: "escape-dir/secret.txt", content: "pwned" })).rejects.toThrow(/outside the workspace/);
    await expect(writeWorkspaceFile(ws, { path: "escape-dir/sub/new.txt", content: "pwned" })).rejects.toThrow(/outside the workspace/);
    await expect(writeWorkspaceFile(ws, { path: "dangling.txt", content: "pwned" })).rejects.toThrow(/does not exist/);
    await secretUntouched();
    expect(await readlink(join(dir, "dangling.txt"))).toBe(join(outside, "new.txt"));
  });

  it("refuses to write a directory", async () => {
    await expect(writeWorkspaceFile(ws, { path: "src", content: "x" })).rejects.toThrow(/directory/);
    await expect(writeWorkspaceFile(ws, { path: "src/", content: "x" })).rejects.toThrow(/names a directory/);
  });

  it("writes through a symlink that stays inside to its target", async () => {
    await writeFile(join(dir, "target.txt"), "old");
    await symlink(join(dir, "target.txt"), join(dir, "inner-link.txt"));
    await writeWorkspaceFile(ws, { path: "inner-link.txt", content: "new" });
    expect(await readFile(join(dir, "target.txt"), "utf8")).toBe("new");
  });
});

describe("edit_file", () => {
  it("replaces exactly one occurrence", async () => {
    await writeFile(join(dir, "src", "a.ts"), "const a = 1;\nconst b = 2;\n");
    expect(await editWorkspaceFile(ws, { path: "src/a.ts", old: "b = 2", new: "b = 3" })).toBe(
      "edited src/a.ts: replaced 1 occurrence at line 2 (26 → 26 bytes)",
    );
    expect(await readFile(join(dir, "src", "a.ts"), "utf8")).toBe("const a = 1;\nconst b = 3;\n");
    // Shorter: the rest of the old content does not stay behind.
    await editWorkspaceFile(ws, { path: "src/a.ts", old: "const a = 1;\n", new: "" });
    expect(await readFile(join(dir, "src", "a.ts"), "utf8")).toBe("const b = 3;\n");
  });

  it("fails when the text occurs zero or several times, leaving the file as it was", async () => {
    await writeFile(join(dir, "twice.txt"), "x = 1; x = 1;");
    await expect(editWorkspaceFile(ws, { path: "twice.txt", old: "x = 1", new: "y" })).rejects.toThrow(/occurs 2 times/);
    await expect(editWorkspaceFile(ws, { path: "twice.txt", old: "zzz", new: "y" })).rejects.toThrow(/does not occur/);
    await expect(editWorkspaceFile(ws, { path: "twice.txt", old: "", new: "y" })).rejects.toThrow(/'old' is empty/);
    expect(await readFile(join(dir, "twice.txt"), "utf8")).toBe("x = 1; x = 1;");
  });

  it("refuses escapes, missing files and binary files", async () => {
    await expect(editWorkspaceFile(ws, { path: "escape.txt", old: "top", new: "x" })).rejects.toThrow(/outside the workspace/);
    await expect(editWorkspaceFile(ws, { path: "escape-dir/secret.txt", old: "top", new: "x" })).rejects.toThrow(/outside/);
    await expect(editWorkspaceFile(ws, { path: "../x", old: "top", new: "x" })).rejects.toThrow(/outside the workspace/);
    await expect(editWorkspaceFile(ws, { path: "nope.txt", old: "a", new: "b" })).rejects.toThrow(/does not exist/);
    await writeFile(join(dir, "blob.bin"), Buffer.from([0x61, 0xff, 0xfe, 0x62]));
    await expect(editWorkspaceFile(ws, { path: "blob.bin", old: "a", new: "b" })).rejects.toThrow(/not UTF-8 text/);
    await secretUntouched();
  });
});

describe("in the toolset", () => {
  it("is offered only when enabled, and only edit_file is marked not idempotent", async () => {
    const base = {
      readMaxBytes: 1000,
      listMaxEntries: 10,
      scriptTimeoutMs: 1000,
      scriptKillGraceMs: 100,
      scriptOutputMaxBytes: 1000,
      scriptEnv: ["PATH"],
    };
    const off = await createToolset({ ...base, workspaceRoot: dir, enabled: ["read_file"] });
    expect(off.definitions.map((d) => d.function.name)).toEqual(["read_file"]);
    const set = await createToolset({ ...base, workspaceRoot: dir, enabled: ["write_file", "edit_file"] });
    expect(set.info?.("write_file")).toEqual({ source: "builtin", idempotent: true });
    expect(set.info?.("edit_file")).toEqual({ source: "builtin", idempotent: false });
    const call = (name: string, args: unknown) => ({
      id: "c1",
      type: "function" as const,
      function: { name, arguments: JSON.stringify(args) },
    });
    const signal = new AbortController().signal;
    expect(await set.run(call("write_file", { path: "t/x.txt", content: "abc" }), signal)).toEqual({
      malformed: false,
      content: "wrote 3 bytes to t/x.txt",
    });
    expect(await set.run(call("edit_file", { path: "t/x.txt", old: "b" }), signal)).toMatchObject({ malformed: true });
    expect(await set.run(call("edit_file", { path: "escape.txt", old: "top", new: "x" }), signal)).toMatchObject({
      malformed: false,
      content: expect.stringMatching(/^error: path 'escape.txt' resolves outside the workspace/),
    });
    await Promise.all([off.close?.(), set.close?.()]);
    await secretUntouched();
  });
});

describe("writes without races", () => {
  it("never writes or creates a file outside while symlinks are swapped in after the check", async () => {
    const race = await mkdtemp(join(tmpdir(), "dirigent-wrace-"));
    const away = await mkdtemp(join(tmpdir(), "dirigent-wrace-outside-"));
    await writeFile(join(away, "f.txt"), "OUTSIDE-SECRET");
    await writeFile(join(race, "f-real"), "inside");
    await symlink(join(away, "f.txt"), join(race, "f-link"));
    await mkdir(join(race, "sub-real"));
    await writeFile(join(race, "sub-real", "f.txt"), "inside");
    await symlink(away, join(race, "sub-link"));
    const raceWs = await openWorkspace(race);
    // Another process swaps `f.txt` (the last component) and `sub` (a directory on the way) between an inside entry
    // and a symlink to the outside, as fast as it can, while this one writes, creates and edits.
    const swap = `const fs = require("node:fs"); process.chdir(${JSON.stringify(raceWs.root)});
      const mv = (a, b) => { try { fs.renameSync(a, b); } catch {} };
      for (;;) { mv("f-real", "f.txt"); mv("sub-real", "sub"); mv("f.txt", "f-real"); mv("sub", "sub-real");
                 mv("f-link", "f.txt"); mv("sub-link", "sub"); mv("f.txt", "f-link"); mv("sub", "sub-link"); }`;
    const swapper = spawn(process.execPath, ["-e", swap], { stdio: "ignore" });
    let written = 0;
    try {
      for (let i = 0; i < 250; i++) {
        for (const path of ["f.txt", "sub/f.txt", `sub/new-${i}.txt`]) {
          try {
            await writeWorkspaceFile(raceWs, { path, content: "inside" });
            written++;
          } catch (err) {
            expect(err).toBeInstanceOf(ToolError);
          }
          await editWorkspaceFile(raceWs, { path, old: "inside", new: "inside" }).catch((err: unknown) => {
            expect(err).toBeInstanceOf(ToolError);
          });
        }
      }
    } finally {
      swapper.kill("SIGKILL");
    }
    try {
      expect(await readFile(join(away, "f.txt"), "utf8")).toBe("OUTSIDE-SECRET");
      expect(execFileSync("ls", ["-A", away], { encoding: "utf8" }).trim()).toBe("f.txt");
      expect(written).toBeGreaterThan(0);
    } finally {
      await rm(race, { recursive: true, force: true });
      await rm(away, { recursive: true, force: true });
    }
  });
});
