import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listWorkspaceFiles, readWorkspaceFile } from "../../../actors/tools/files.js";
import { openWorkspace, ToolError, type Workspace } from "../../../actors/tools/workspace.js";

let dir: string;
let outside: string;
let ws: Workspace;
const limits = { readMaxBytes: 16, listMaxEntries: 3 };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-ws-"));
  outside = await mkdtemp(join(tmpdir(), "dirigent-outside-"));
  await writeFile(join(outside, "secret.txt"), "top secret");
  await mkdir(join(dir, "src"));
  await writeFile(join(dir, "src", "a.ts"), "export const a = 1;\n");
  await writeFile(join(dir, "small.txt"), "hello");
  await writeFile(join(dir, "long.txt"), "0123456789abcdefghijklmnopqrstuvwxyz");
  await symlink(join(outside, "secret.txt"), join(dir, "escape.txt"));
  await symlink(outside, join(dir, "escape-dir"));
  await symlink(join(dir, "small.txt"), join(dir, "inner-link.txt"));
  ws = await openWorkspace(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe("workspace confinement", () => {
  it("refuses '..' escapes", async () => {
    await expect(ws.resolve("../secret.txt")).rejects.toThrow(/outside the workspace/);
    await expect(ws.resolve("src/../../x")).rejects.toBeInstanceOf(ToolError);
  });

  it("refuses absolute paths outside the root, accepts those inside", async () => {
    await expect(ws.resolve(join(outside, "secret.txt"))).rejects.toThrow(/outside the workspace/);
    await expect(ws.resolve("/etc/passwd")).rejects.toThrow(/outside the workspace/);
    expect(ws.display(await ws.resolve(join(dir, "small.txt")))).toBe("small.txt");
  });

  it("refuses a symlink that points out of the workspace, file or directory", async () => {
    await expect(ws.resolve("escape.txt")).rejects.toThrow(/resolves outside the workspace \(symlink\)/);
    await expect(ws.resolve("escape-dir/secret.txt")).rejects.toThrow(/outside the workspace/);
    await expect(readWorkspaceFile(ws, limits, { path: "escape.txt" })).rejects.toThrow(/symlink/);
  });

  it("follows a symlink that stays inside", async () => {
    expect(await readWorkspaceFile(ws, limits, { path: "inner-link.txt" })).toBe("hello");
  });

  it("names a missing path", async () => {
    await expect(ws.resolve("nope.txt")).rejects.toThrow(/'nope.txt' does not exist/);
  });
});

describe("read_file", () => {
  it("returns a small file whole", async () => {
    expect(await readWorkspaceFile(ws, { ...limits, readMaxBytes: 100 }, { path: "src/a.ts" })).toBe("export const a = 1;\n");
  });

  it("cuts a file at the size cap with a note, and reads on from an offset", async () => {
    const first = await readWorkspaceFile(ws, limits, { path: "long.txt" });
    expect(first).toBe("0123456789abcdef\n[truncated: bytes 0–16 of 36; call read_file with offset 16 for more]");
    const rest = await readWorkspaceFile(ws, { ...limits, readMaxBytes: 100 }, { path: "long.txt", offset: 16 });
    expect(rest.startsWith("ghijklmnopqrstuvwxyz\n[truncated: bytes 16–36 of 36")).toBe(true);
  });

  it("refuses a directory", async () => {
    await expect(readWorkspaceFile(ws, limits, { path: "src" })).rejects.toThrow(/not a regular file/);
  });
});

describe("list_files", () => {
  it("lists with markers and caps the entries", async () => {
    const listing = await listWorkspaceFiles(ws, limits, {});
    expect(listing.split("\n")).toEqual(["escape-dir@", "escape.txt@", "inner-link.txt@", "[truncated: more than 3 entries; list a subdirectory]"]);
  });

  it("walks subdirectories when recursive, without following symlinks", async () => {
    const listing = await listWorkspaceFiles(ws, { ...limits, listMaxEntries: 100 }, { recursive: true });
    expect(listing.split("\n")).toContain("src/a.ts");
    expect(listing).not.toContain("secret");
  });

  it("refuses to list outside the workspace", async () => {
    await expect(listWorkspaceFiles(ws, limits, { path: ".." })).rejects.toThrow(/outside the workspace/);
  });
});
