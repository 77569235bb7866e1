/**
 * The indexer behind `dirigent memory index DIR`: walks a directory (respecting `.gitignore` files, `--include`
 * and `--exclude` globs, and a size cap), skips binaries and symbolic links, and describes each file in one line of
 * metadata. Re-indexing is incremental: a file whose size and modification time are unchanged is not read again.
 */
import { constants } from "node:fs";
import { open, readFile, readdir, stat } from "node:fs/promises";
import { join, relative as relativePath, resolve } from "node:path";
import { IndexConflictError, type IndexEntry, type IndexStore } from "../../actors/memory/index-store.js";
import { BINARY_EXTENSIONS, describe, looksBinary, metadataOf } from "./describe.js";
import { compileGlob, IgnoreFile, IgnoreStack } from "./gitignore.js";
import { identifiersOf } from "./identifiers.js";
import type { Summarize } from "./summarize.js";

/** Options of {@link indexDirectory}: the globs and size cap of `dirigent memory index`, and hooks for progress and tests. */
export interface IndexOptions {
  /** Only files matching one of these globs (relative to the directory) are indexed. */
  include?: readonly string[];
  /** Files and directories matching one of these globs are skipped. */
  exclude?: readonly string[];
  /** Larger files are skipped. Default 1 MiB. */
  maxFileSize?: number;
  /** Entries of an earlier run; files whose size and mtime did not change keep their metadata unread. */
  previous?: readonly IndexEntry[];
  /** Reads up to `bytes` from the start of a file; replaceable so tests can count reads. */
  readHead?: (path: string, bytes: number) => Promise<Uint8Array>;
  /**
   * Writes the description of each file read (`--summarize`). Files it describes are stamped as summarized; an
   * earlier run's entry counts as unchanged only if it was summarized too, so a summarizing run re-describes files
   * an extracting run described. Without it, summarized entries of unchanged files are kept.
   */
  summarize?: Summarize;
  /** Hears about each file read: how many of those to read are done. */
  onProgress?: (progress: { done: number; total: number; path: string }) => void;
}

/** What a run did. */
export interface IndexStats {
  /** Files in the index after the run. */
  files: number;
  /** Files read (new or changed). */
  read: number;
  /** Files kept from the previous run without reading. */
  reused: number;
  /** Files skipped: binary, too large, excluded or ignored (directories count once). */
  skipped: number;
  /** Files read whose description the model wrote (`--summarize`). */
  summarized?: number;
}

/** The result of {@link indexDirectory}. */
export interface IndexResult {
  entries: IndexEntry[];
  stats: IndexStats;
}

/** The default size cap. */
export const DEFAULT_MAX_FILE_SIZE = 1024 * 1024;
/** Suffix of the stamp of an entry whose description the model wrote. */
export const SUMMARIZED = ":s";
/**
 * Suffix of the stamp of an entry whose description and identifiers were extracted by the current {@link describe}
 * and {@link identifiersOf}: entries of an earlier extraction (no suffix, `:x2`) are read again once, so they get
 * the richer descriptions and the identifiers.
 */
export const EXTRACTED = ":x3";
/** Bytes read from each file to describe it. */
export const HEAD_BYTES = 64 * 1024;

/**
 * Reads up to `bytes` from the start of a file. Opened without following a symlink and without blocking: a file
 * swapped for a FIFO or a symlink after the walk found it is an error naming it, never a hang.
 */
export async function readHead(path: string, bytes: number): Promise<Uint8Array> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!(await handle.stat()).isFile()) throw new Error(`cannot index '${path}': not a regular file`);
    const buffer = new Uint8Array(bytes);
    const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * Indexes the files below `dir`.
 * @throws {Error} naming `dir` when it is missing or not a directory; {@link GlobError} naming a bad glob.
 */
export async function indexDirectory(dir: string, options: IndexOptions = {}): Promise<IndexResult> {
  const root = resolve(dir);
  const info = await stat(root).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`cannot index '${dir}': ${err.code === "ENOENT" ? "no such directory" : err.message}`);
  });
  if (!info.isDirectory()) throw new Error(`cannot index '${dir}': not a directory`);
  const includes = (options.include ?? []).map(compileGlob);
  const excludes = (options.exclude ?? []).map(compileGlob);
  const maxFileSize = options.maxFileSize ?? DEFAULT_MAX_FILE_SIZE;
  if (!Number.isInteger(maxFileSize) || maxFileSize <= 0)
    throw new RangeError(`max file size must be a positive integer, got '${maxFileSize}'`);
  const read = options.readHead ?? readHead;
  const previous = new Map((options.previous ?? []).map((e) => [e.path, e]));
  const stats: IndexStats = { files: 0, read: 0, reused: 0, skipped: 0 };
  const found: { path: string; size: number; stamp: string }[] = [];

  const walk = async (absolute: string, relative: string, ignores: IgnoreStack): Promise<void> => {
    const children = await readdir(absolute, { withFileTypes: true });
    const gitignore = children.find((c) => c.name === ".gitignore" && c.isFile());
    if (gitignore) ignores = ignores.with(relative, new IgnoreFile(await readFile(join(absolute, ".gitignore"), "utf8")));
    children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const child of children) {
      const rel = relative === "" ? child.name : `${relative}/${child.name}`;
      const path = join(absolute, child.name);
      if (child.isDirectory()) {
        if (child.name === ".git" || ignores.ignores(rel, true) || excludes.some((x) => x(rel))) stats.skipped++;
        else await walk(path, rel, ignores);
      } else if (child.isFile()) {
        if (ignores.ignores(rel, false) || excludes.some((x) => x(rel)) || (includes.length > 0 && !includes.some((x) => x(rel)))) {
          stats.skipped++;
          continue;
        }
        const fileInfo = await stat(path);
        if (fileInfo.size > maxFileSize || BINARY_EXTENSIONS.has(extension(child.name))) stats.skipped++;
        else found.push({ path, size: fileInfo.size, stamp: `${fileInfo.size}:${Math.trunc(fileInfo.mtimeMs)}` });
      }
    }
  };
  await walk(root, "", new IgnoreStack());

  const summarize = options.summarize;
  if (summarize) stats.summarized = 0;
  const unchanged = (known: IndexEntry | undefined, stamp: string) =>
    known !== undefined && (known.stamp === `${stamp}${SUMMARIZED}` || (summarize === undefined && known.stamp === `${stamp}${EXTRACTED}`));
  const total = found.filter((file) => !unchanged(previous.get(file.path), file.stamp)).length;
  let done = 0;
  const entries = await mapLimit(found, 16, async (file): Promise<IndexEntry | undefined> => {
    const known = previous.get(file.path);
    if (unchanged(known, file.stamp)) {
      stats.reused++;
      return known;
    }
    stats.read++;
    try {
      const head = await read(file.path, Math.min(HEAD_BYTES, Math.max(1, file.size)));
      if (looksBinary(head.subarray(0, 8000))) {
        stats.skipped++;
        return undefined;
      }
      const text = new TextDecoder().decode(head);
      const extracted = describe(file.path, text);
      const summary = summarize
        ? await summarize({ path: file.path, relative: relativePath(root, file.path), text, extracted })
        : undefined;
      const description = summary ?? extracted;
      const identifiers = identifiersOf(file.path, text, description);
      const entry: IndexEntry = {
        path: file.path,
        metadata: metadataOf(file.path, file.size, description),
        stamp: `${file.stamp}${summary === undefined ? EXTRACTED : SUMMARIZED}`,
      };
      if (identifiers !== "") entry.identifiers = identifiers;
      if (summary !== undefined) stats.summarized = (stats.summarized ?? 0) + 1;
      return entry;
    } finally {
      options.onProgress?.({ done: ++done, total, path: file.path });
    }
  });
  const kept = entries.filter((e): e is IndexEntry => e !== undefined);
  stats.files = kept.length;
  return { entries: kept, stats };
}

/** Merges attempted before {@link updateIndex} gives up on writers that keep replacing the index under it. */
export const MERGE_ATTEMPTS = 10;

/**
 * Indexes `dir` into the global index: entries below `dir` are replaced by this run's, entries elsewhere are
 * kept, and the whole index is written as one new generation. When no file below `dir` was added, changed or
 * removed, nothing is written and the current generation stays (`written` is false). The write is conditional on
 * the generation merged into: when another run replaced it meanwhile (say, indexing another directory), the merge
 * is redone from the new generation, so neither run's entries are lost.
 */
export async function updateIndex(
  store: IndexStore,
  dir: string,
  options: Omit<IndexOptions, "previous"> = {},
): Promise<IndexResult & { generation: string; written: boolean }> {
  const root = resolve(dir);
  const current = await store.getGlobalIndex();
  const inside = (path: string) => path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`);
  const previous = current.entries.filter((e) => inside(e.path));
  const result = await indexDirectory(root, { ...options, previous });
  if (current.generation !== "" && result.stats.read === 0 && result.entries.length === previous.length) {
    return { ...result, generation: current.generation, written: false };
  }
  for (let attempt = 1, base = current; ; attempt++) {
    try {
      const generation = await store.updateGlobalIndex([...base.entries.filter((e) => !inside(e.path)), ...result.entries], {
        ifGeneration: base.generation,
      });
      return { ...result, generation, written: true };
    } catch (err) {
      if (!(err instanceof IndexConflictError) || attempt >= MERGE_ATTEMPTS) throw err;
      base = await store.getGlobalIndex();
    }
  }
}

function extension(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot <= 0 ? "" : name.slice(dot).toLowerCase();
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
