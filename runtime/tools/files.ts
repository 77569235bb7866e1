/**
 * `read_file` and `list_files`: read-only views of the workspace, with size and entry caps so that one tool
 * answer cannot flood the model's context.
 *
 * Without races: a path is checked ({@link Workspace.resolve}), then opened with `O_NOFOLLOW | O_NONBLOCK` (a
 * symlink swapped in for the last component fails to open; a FIFO or device opens at once instead of blocking a
 * thread of the pool), the opened descriptor is `fstat`ed (only a regular file is read, only a directory listed),
 * and on Linux its real path (`/proc/self/fd/N`) must still be inside the workspace (a directory on the way swapped
 * for a symlink after the check is caught there). Only then is it read, through that descriptor.
 */
import { constants, type Stats } from "node:fs";
import { open, readdir, readlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { isInside, ToolError, type Workspace } from "./workspace.js";

/** Caps of the file tools. */
export interface FileToolLimits {
  /** Largest number of bytes one `read_file` returns; the rest is cut with a note. */
  readMaxBytes: number;
  /** Largest number of entries one `list_files` returns. */
  listMaxEntries: number;
}

/** Reads a text file of the workspace, at most `readMaxBytes` of it from `offset`. */
export async function readWorkspaceFile(
  ws: Workspace,
  limits: FileToolLimits,
  args: { path: string; offset?: number | undefined },
): Promise<string> {
  const path = await ws.resolve(args.path);
  const { handle, info } = await openInside(ws, path, args.path, "file");
  try {
    const offset = Math.min(args.offset ?? 0, info.size);
    const length = Math.min(limits.readMaxBytes, info.size - offset);
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, offset);
    const body = buffer.subarray(0, bytesRead).toString("utf8");
    const end = offset + bytesRead;
    if (end >= info.size && offset === 0) return body;
    return `${body}\n[truncated: bytes ${offset}–${end} of ${info.size}; call read_file with offset ${end} for more]`;
  } finally {
    await handle.close();
  }
}

/**
 * Lists a workspace directory: directories end in `/`, symlinks in `@` (never followed). With `recursive`, walks
 * breadth-first. Stops at `listMaxEntries` with a note.
 */
export async function listWorkspaceFiles(
  ws: Workspace,
  limits: FileToolLimits,
  args: { path?: string | undefined; recursive?: boolean | undefined },
): Promise<string> {
  const start = await ws.resolve(args.path ?? ".");
  const lines: string[] = [];
  const queue = [start];
  let truncated = false;
  while (queue.length > 0 && !truncated) {
    const dir = queue.shift() ?? start;
    let entries;
    try {
      const { handle } = await openInside(ws, dir, dir === start ? (args.path ?? ".") : ws.display(dir), "dir");
      try {
        entries = await readdir(LINUX ? `/proc/self/fd/${handle.fd}` : dir, { withFileTypes: true });
      } finally {
        await handle.close();
      }
    } catch (err) {
      if (dir === start)
        throw err instanceof ToolError ? err : new ToolError(`'${args.path ?? "."}' is not a readable directory`, { cause: err });
      continue;
    }
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      if (lines.length >= limits.listMaxEntries) {
        truncated = true;
        break;
      }
      const full = join(dir, entry.name);
      const suffix = entry.isDirectory() ? "/" : entry.isSymbolicLink() ? "@" : "";
      lines.push(`${ws.display(full)}${suffix}`);
      if (args.recursive && entry.isDirectory()) queue.push(full);
    }
  }
  if (truncated) lines.push(`[truncated: more than ${limits.listMaxEntries} entries; list a subdirectory]`);
  return lines.length > 0 ? lines.join("\n") : "(empty directory)";
}

const LINUX = process.platform === "linux";

function kindOf(info: Stats): string {
  if (info.isDirectory()) return "a directory";
  if (info.isFIFO()) return "a FIFO";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice() || info.isBlockDevice()) return "a device";
  return "something else";
}

/**
 * Opens `path` (a real path inside the workspace, as {@link Workspace.resolve} gave it) without following a
 * symlink and without blocking, and checks what was opened: a regular file (`file`) or a directory (`dir`), whose
 * real path is inside the workspace. `shown` names it in errors.
 * @throws {ToolError} naming the problem; the descriptor is closed then.
 */
async function openInside(ws: Workspace, path: string, shown: string, kind: "file" | "dir"): Promise<{ handle: FileHandle; info: Stats }> {
  let handle: FileHandle;
  try {
    handle = await open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (kind === "dir" ? constants.O_DIRECTORY : 0),
    );
  } catch (err) {
    const code = err instanceof Error && "code" in err ? String(err.code) : "";
    if (code === "ELOOP") throw new ToolError(`'${shown}' is a symlink (it changed after it was checked); not followed`);
    if (code === "ENOENT") throw new ToolError(`path '${shown}' does not exist`);
    if (code === "ENOTDIR") throw new ToolError(`'${shown}' is not a directory`);
    throw new ToolError(`'${shown}' cannot be opened (${code || "error"})`);
  }
  try {
    const info = await handle.stat();
    if (kind === "file" && !info.isFile())
      throw new ToolError(`'${shown}' is not a regular file but ${kindOf(info)}: read_file reads regular files only`);
    if (kind === "dir" && !info.isDirectory()) throw new ToolError(`'${shown}' is not a directory`);
    if (LINUX) {
      const actual = await readlink(`/proc/self/fd/${handle.fd}`);
      if (!isInside(ws.root, actual.replace(/ \(deleted\)$/, "")))
        throw new ToolError(`path '${shown}' resolves outside the workspace (it changed after it was checked)`);
    }
    return { handle, info };
  } catch (err) {
    await handle.close();
    throw err;
  }
}
