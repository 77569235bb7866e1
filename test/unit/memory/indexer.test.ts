import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { IndexRanker } from "../../../actors/memory/rank.js";
import { InMemoryIndexStore } from "../../../runtime/in-process/index-store.js";
import { EXTRACTED, indexDirectory, readHead, updateIndex } from "../../../runtime/indexer/indexer.js";

let dir: string;

async function put(relative: string, content: string | Uint8Array): Promise<void> {
  await mkdir(join(dir, relative, ".."), { recursive: true });
  await writeFile(join(dir, relative), content);
}

/** A `readHead` that records which files were read. */
function countingReader() {
  const reads: string[] = [];
  return { reads, readHead: (path: string, bytes: number) => (reads.push(path.slice(dir.length + 1)), readHead(path, bytes)) };
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-index-"));
  await put(".gitignore", "dist/\n*.log\n!keep.log\n/secret.txt\n");
  await put("README.md", "# Dirigent\n\nAn actor runtime.\n");
  await put("src/parse.ts", "/** Parses XML task templates. */\nexport function parseTemplate() {}\n");
  await put("src/bus.ts", "// The NATS bus.\nexport class NatsBus {}\n");
  await put("src/.gitignore", "generated.ts\n");
  await put("src/generated.ts", "export const x = 1;\n");
  await put("scripts/train.py", '"""Train the classifier."""\ndef train():\n    pass\n');
  await put("dist/out.js", "compiled");
  await put("debug.log", "noise");
  await put("keep.log", "kept on purpose");
  await put("secret.txt", "top secret");
  await put("sub/secret.txt", "not anchored here");
  await put("image.bin", new Uint8Array([1, 0, 2, 3]));
  await put("data.dat", new Uint8Array([80, 0, 75]));
  await put(".git/HEAD", "ref: refs/heads/main\n");
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const relativePaths = (entries: readonly { path: string }[]) => entries.map((e) => e.path.slice(dir.length + 1)).sort();

describe("indexer", () => {
  it("walks the directory respecting nested .gitignore files and skipping binaries and .git", async () => {
    const { entries, stats } = await indexDirectory(dir);
    expect(relativePaths(entries)).toEqual([
      ".gitignore",
      "README.md",
      "keep.log",
      "scripts/train.py",
      "src/.gitignore",
      "src/bus.ts",
      "src/parse.ts",
      "sub/secret.txt",
    ]);
    expect(stats.files).toBe(8);
    const parse = entries.find((e) => e.path.endsWith("parse.ts"));
    expect(parse?.metadata).toBe("language: TypeScript; size: 69 B; name: parse.ts; Parses XML task templates.; exports: parseTemplate");
    expect(entries.every((e) => !e.metadata.includes("export function"))).toBe(true);
  });

  it("applies --include, --exclude and --max-file-size", async () => {
    const included = await indexDirectory(dir, { include: ["src/**/*.ts", "*.py"], exclude: ["bus.ts"] });
    expect(relativePaths(included.entries)).toEqual(["scripts/train.py", "src/parse.ts"]);
    const small = await indexDirectory(dir, { maxFileSize: 30 });
    expect(relativePaths(small.entries)).toEqual(["README.md", "keep.log", "src/.gitignore", "sub/secret.txt"]);
  });

  it("re-reads only new and changed files (and sniffs unknown binaries again), drops deleted ones", async () => {
    const first = countingReader();
    const store = new InMemoryIndexStore();
    const one = await updateIndex(store, dir, { readHead: first.readHead });
    expect(one.stats.read).toBe(9);
    await put("src/bus.ts", "// The NATS bus, reworked.\nexport class NatsBus {}\nexport class Other {}\n");
    await utimes(join(dir, "src/bus.ts"), new Date(), new Date(Date.now() + 5000));
    await put("src/new.ts", "export const fresh = true;\n");
    await rm(join(dir, "README.md"));
    const second = countingReader();
    const two = await updateIndex(store, dir, { readHead: second.readHead });
    expect(second.reads.sort()).toEqual(["data.dat", "src/bus.ts", "src/new.ts"]);
    expect(two.stats).toMatchObject({ read: 3, reused: 6, files: 8 });
    const { entries, generation } = await store.getGlobalIndex();
    expect(generation).toBe(two.generation);
    expect(relativePaths(entries)).not.toContain("README.md");
    expect(entries.find((e) => e.path.endsWith("bus.ts"))?.metadata).toContain("exports: NatsBus, Other");
  });

  it("reads again, once, the files an earlier version of the extraction described", async () => {
    const store = new InMemoryIndexStore();
    await rm(join(dir, "data.dat"));
    await updateIndex(store, dir);
    const { entries } = await store.getGlobalIndex();
    expect(entries.every((e) => e.stamp?.endsWith(EXTRACTED))).toBe(true);
    await store.updateGlobalIndex(entries.map((e) => ({ ...e, stamp: e.stamp?.slice(0, -EXTRACTED.length) })));
    expect((await updateIndex(store, dir)).stats).toMatchObject({ read: 8, reused: 0 });
    expect((await updateIndex(store, dir)).stats).toMatchObject({ read: 0, reused: 8 });
  });

  it("writes no new generation when nothing changed", async () => {
    const store = new InMemoryIndexStore();
    await rm(join(dir, "data.dat"));
    const first = await updateIndex(store, dir);
    const second = await updateIndex(store, dir);
    expect(second).toMatchObject({ written: false, generation: first.generation, stats: { read: 0, reused: 8 } });
    await rm(join(dir, "keep.log"));
    expect(await updateIndex(store, dir)).toMatchObject({ written: true, stats: { read: 0, files: 7 } });
  });

  it("keeps entries of other directories in the global index", async () => {
    const store = new InMemoryIndexStore();
    await store.updateGlobalIndex([{ path: "/elsewhere/a.ts", metadata: "other repo" }]);
    await updateIndex(store, join(dir, "src"));
    expect((await store.getGlobalIndex()).entries.map((e) => e.path)).toContain("/elsewhere/a.ts");
  });

  it("keeps both runs' entries when two index different directories at once, redoing the merge that lost", async () => {
    const store = new InMemoryIndexStore();
    // Both runs read the empty index before either writes: the second write finds the first's generation.
    const [src, scripts] = await Promise.all([updateIndex(store, join(dir, "src")), updateIndex(store, join(dir, "scripts"))]);
    const { generation, entries } = await store.getGlobalIndex();
    expect([src.generation, scripts.generation]).toContain(generation);
    expect(relativePaths(entries)).toEqual(["scripts/train.py", "src/.gitignore", "src/bus.ts", "src/parse.ts"]);
  });

  it("reads a file's head without blocking on a FIFO or following a symlink swapped in for it", async () => {
    execFileSync("mkfifo", [join(dir, "swapped.fifo")]);
    await expect(readHead(join(dir, "swapped.fifo"), 10)).rejects.toThrow(/swapped\.fifo': not a regular file/);
    await writeFile(join(dir, "real.txt"), "real");
    await symlink(join(dir, "real.txt"), join(dir, "link.txt"));
    await expect(readHead(join(dir, "link.txt"), 10)).rejects.toThrow(/ELOOP/);
    expect(new TextDecoder().decode(await readHead(join(dir, "real.txt"), 10))).toBe("real");
  });

  it("does not follow symbolic links", async () => {
    await symlink(join(dir, "src"), join(dir, "linked"));
    const { entries } = await indexDirectory(dir);
    expect(relativePaths(entries).some((p) => p.startsWith("linked"))).toBe(false);
  });

  it("ranks the obviously right file first over a real index", async () => {
    const { entries } = await indexDirectory(dir);
    expect(new IndexRanker(entries).match("fix the xml template parser")[0]?.path).toBe(join(dir, "src/parse.ts"));
    expect(new IndexRanker(entries).match("train a classifier")[0]?.path).toBe(join(dir, "scripts/train.py"));
  });

  it("names a missing directory, a file given as directory and a bad glob", async () => {
    await expect(indexDirectory(join(dir, "nope"))).rejects.toThrow(`cannot index '${join(dir, "nope")}': no such directory`);
    await expect(indexDirectory(join(dir, "README.md"))).rejects.toThrow("not a directory");
    await expect(indexDirectory(dir, { include: ["src/[x"] })).rejects.toThrow("glob 'src/[x'");
    await expect(indexDirectory(dir, { maxFileSize: -1 })).rejects.toThrow("max file size");
  });
});
