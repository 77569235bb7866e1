import { execFileSync, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listWorkspaceFiles, readWorkspaceFile } from "../../../runtime/tools/files.js";
import { openWorkspace, ToolError, type Workspace } from "../../../runtime/tools/workspace.js";

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
    expect(listing.split("\n")).toEqual([
      "escape-dir@",
      "escape.txt@",
      "inner-link.txt@",
      "[truncated: more than 3 entries; list a subdirectory]",
    ]);
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

describe("reads without races", () => {
  it("refuses a FIFO at once, however often, and keeps reading other files", async () => {
    execFileSync("mkfifo", [join(dir, "pipe")]);
    try {
      // More reads than libuv has threads: a blocking open of the FIFO would wedge every later file operation.
      const answers = await Promise.allSettled(Array.from({ length: 8 }, () => readWorkspaceFile(ws, limits, { path: "pipe" })));
      for (const answer of answers) {
        expect(answer.status).toBe("rejected");
        if (answer.status === "rejected") expect(String(answer.reason)).toMatch(/'pipe' is not a regular file but a FIFO/);
      }
      expect(await readWorkspaceFile(ws, limits, { path: "small.txt" })).toBe("hello");
      expect(await listWorkspaceFiles(ws, { ...limits, listMaxEntries: 100 }, {})).toContain("pipe");
    } finally {
      await rm(join(dir, "pipe"));
    }
  });

  it("never returns the content of a file outside while symlinks are swapped in after the check", async () => {
    const race = await mkdtemp(join(tmpdir(), "dirigent-race-"));
    const away = await mkdtemp(join(tmpdir(), "dirigent-race-outside-"));
    await writeFile(join(away, "f.txt"), "OUTSIDE-SECRET");
    await writeFile(join(race, "f-real"), "inside");
    await symlink(join(away, "f.txt"), join(race, "f-link"));
    await mkdir(join(race, "sub-real"));
    await writeFile(join(race, "sub-real", "f.txt"), "inside");
    await symlink(away, join(race, "sub-link"));
    const raceWs = await openWorkspace(race);
    // Another process swaps `f.txt` (the last component) and `sub` (a directory on the way) between an inside
    // entry and a symlink to the outside, as fast as it can, while this one reads.
    const swap = `const fs = require("node:fs"); process.chdir(${JSON.stringify(raceWs.root)});
      const mv = (a, b) => { try { fs.renameSync(a, b); } catch {} };
      for (let n = 0; ; n++) { mv("f-real", "f.txt"); mv("sub-real", "sub"); mv("f.txt", "f-real"); mv("sub", "sub-real");
                 mv("f-link", "f.txt"); mv("sub-link", "sub"); mv("f.txt", "f-link"); mv("sub", "sub-link");
                 if (n === 0) process.stdout.write("swapping"); }`;
    const swapper = spawn(process.execPath, ["-e", swap], { stdio: ["ignore", "pipe", "ignore"] });
    const exited = new Promise<void>((resolve) => swapper.once("exit", () => resolve()));
    const seen = new Map<string, number>();
    try {
      // The reads start once the swaps have: on a loaded machine the swapper's start can outlast all of them.
      await new Promise<void>((resolve, reject) => {
        swapper.stdout.once("data", () => resolve());
        swapper.once("exit", (code) => reject(new Error(`the swapper exited (${code}) before swapping`)));
      });
      for (let i = 0; i < 1500; i++) {
        for (const path of ["f.txt", "sub/f.txt"]) {
          let answer: string;
          try {
            answer = await readWorkspaceFile(raceWs, { readMaxBytes: 100, listMaxEntries: 10 }, { path });
          } catch (err) {
            expect(err).toBeInstanceOf(ToolError);
            answer = "refused";
          }
          expect(answer).not.toContain("OUTSIDE-SECRET");
          seen.set(answer, (seen.get(answer) ?? 0) + 1);
        }
      }
    } finally {
      swapper.kill("SIGKILL");
      // Removed once the swapper has stopped: a rename in flight would make the removal fail (ENOTEMPTY).
      await exited;
      await rm(race, { recursive: true, force: true });
      await rm(away, { recursive: true, force: true });
    }
    // The reads ran while the swaps did: some found the inside file.
    expect(seen.get("inside") ?? 0).toBeGreaterThan(0);
  });
});
