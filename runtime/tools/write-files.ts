/**
 * `write_file` and `edit_file`: the workspace's files changed by the model, under the confinement of `read_file`
 * (runtime/tools/files.ts). A path is checked lexically and after `realpath` ({@link Workspace.resolve}); a file is
 * opened with `O_NOFOLLOW | O_NONBLOCK` (a symlink swapped in for the last component fails to open), without
 * `O_TRUNC`, on Linux through its directory's descriptor (so that `O_CREAT` never creates a file outside); the opened
 * descriptor must be a regular file whose real path (`/proc/self/fd/N` on Linux) is still inside the workspace. Only
 * then is it truncated and written, through that descriptor.
 *
 * A missing parent directory of `write_file` is created one component at a time below the deepest existing one
 * (itself resolved inside the workspace); `mkdir` never follows a symlink at the component it creates.
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, readlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { isInside, ToolError, type Workspace } from "./workspace.js";

/** Largest file `edit_file` reads and rewrites. */
export const EDIT_MAX_BYTES = 8 * 1024 * 1024;

const LINUX = process.platform === "linux";

/** Creates or replaces a file of the workspace with `content` (UTF-8); missing parent directories are created. */
export async function writeWorkspaceFile(ws: Workspace, args: { path: string; content: string }): Promise<string> {
  const target = await writableTarget(ws, args.path);
  const handle = await openInsideForWrite(ws, target, args.path, constants.O_CREAT);
  try {
    const bytes = Buffer.from(args.content, "utf8");
    await handle.truncate(0);
    await handle.write(bytes, 0, bytes.length, 0);
    return `wrote ${bytes.length} bytes to ${ws.display(target)}`;
  } finally {
    await handle.close();
  }
}

/** Replaces the one occurrence of `old` in a text file of the workspace by `new`; zero or several are an error. */
export async function editWorkspaceFile(ws: Workspace, args: { path: string; old: string; new: string }): Promise<string> {
  if (args.old === "") throw new ToolError("'old' is empty: give the exact text to replace");
  const target = await ws.resolve(args.path);
  const handle = await openInsideForWrite(ws, target, args.path, 0);
  try {
    const { size } = await handle.stat();
    if (size > EDIT_MAX_BYTES)
      throw new ToolError(`'${args.path}' is ${size} bytes; edit_file edits files up to ${EDIT_MAX_BYTES} bytes (use write_file)`);
    const buffer = Buffer.alloc(size);
    const { bytesRead } = await handle.read(buffer, 0, size, 0);
    const raw = buffer.subarray(0, bytesRead);
    const text = raw.toString("utf8");
    if (!Buffer.from(text, "utf8").equals(raw)) throw new ToolError(`'${args.path}' is not UTF-8 text; edit_file edits text files only`);
    const count = occurrences(text, args.old);
    if (count === 0) throw new ToolError(`'old' does not occur in '${args.path}'; read the file and copy the text exactly`);
    if (count > 1)
      throw new ToolError(`'old' occurs ${count} times in '${args.path}'; include more surrounding text so that it occurs exactly once`);
    const at = text.indexOf(args.old);
    const edited = Buffer.from(text.slice(0, at) + args.new + text.slice(at + args.old.length), "utf8");
    await handle.truncate(0);
    await handle.write(edited, 0, edited.length, 0);
    const line = text.slice(0, at).split("\n").length;
    return `edited ${ws.display(target)}: replaced 1 occurrence at line ${line} (${raw.length} → ${edited.length} bytes)`;
  } finally {
    await handle.close();
  }
}

/** How many times `needle` starts in `text` (overlapping starts count: each would be a different edit). */
function occurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at >= 0 && count < 1000; at = text.indexOf(needle, at + 1)) count++;
  return count;
}

/**
 * The real path `write_file` writes: an existing path resolved inside the workspace, else a new file in its parent
 * directory (resolved, its missing components created).
 */
async function writableTarget(ws: Workspace, path: string): Promise<string> {
  if (path.endsWith("/") || path.endsWith(sep)) throw new ToolError(`'${path}' names a directory; give a file path`);
  const wanted = isAbsolute(path) ? resolve(path) : resolve(ws.root, path);
  if (!isInside(ws.root, wanted) || wanted === ws.root) throw new ToolError(`path '${path}' is outside the workspace`);
  const exists = await lstat(wanted).then(
    () => true,
    () => false,
  );
  if (exists) return ws.resolve(path);
  const parent = await ensureDirectory(ws, dirname(wanted), path);
  return join(parent, basename(wanted));
}

/** The real path of directory `dir` (lexically inside the workspace), creating its missing components. */
async function ensureDirectory(ws: Workspace, dir: string, shown: string): Promise<string> {
  const missing: string[] = [];
  let existing = dir;
  while (
    !(await lstat(existing).then(
      () => true,
      () => false,
    ))
  ) {
    missing.unshift(basename(existing));
    existing = dirname(existing);
  }
  let real = await ws.resolve(relative(ws.root, existing) || ".");
  for (const part of missing) {
    const next = join(real, part);
    try {
      await mkdir(next);
    } catch (err) {
      if (!(err instanceof Error && "code" in err && err.code === "EEXIST"))
        throw new ToolError(
          `cannot create the directory of '${shown}' (${err instanceof Error && "code" in err ? String(err.code) : "error"})`,
        );
    }
    // Created (or raced into existence): resolved again, so that a symlink put there cannot lead out.
    real = await ws.resolve(relative(ws.root, next));
  }
  return real;
}

/**
 * Opens `path` (a real path inside the workspace) for reading and writing without following a symlink and without
 * blocking (`extra`: `O_CREAT` for `write_file`), and checks it is a regular file whose real path is inside.
 *
 * On Linux the file is opened through its directory: the directory is opened first (`O_DIRECTORY | O_NOFOLLOW`) and
 * its real path checked, then the file is opened as `/proc/self/fd/N/NAME` (in effect `openat`): a directory on the
 * way swapped for a symlink after the check cannot make `O_CREAT` create a file outside the workspace.
 * @throws {ToolError} naming the problem; the descriptors are closed then.
 */
async function openInsideForWrite(ws: Workspace, path: string, shown: string, extra: number): Promise<FileHandle> {
  const flags = constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK | extra;
  let handle: FileHandle;
  try {
    if (LINUX) {
      const dir = await open(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        const actual = await readlink(`/proc/self/fd/${dir.fd}`);
        if (!isInside(ws.root, actual))
          throw new ToolError(`path '${shown}' resolves outside the workspace (it changed after it was checked)`);
        handle = await open(`/proc/self/fd/${dir.fd}/${basename(path)}`, flags, 0o644);
      } finally {
        await dir.close();
      }
    } else {
      handle = await open(path, flags, 0o644);
    }
  } catch (err) {
    if (err instanceof ToolError) throw err;
    const code = err instanceof Error && "code" in err ? String(err.code) : "";
    if (code === "ELOOP") throw new ToolError(`'${shown}' is a symlink (it changed after it was checked); not followed`);
    if (code === "ENOENT") throw new ToolError(`path '${shown}' does not exist`);
    if (code === "ENOTDIR") throw new ToolError(`a directory of '${shown}' is not a directory (it changed after it was checked)`);
    if (code === "EISDIR") throw new ToolError(`'${shown}' is a directory`);
    if (code === "ENXIO") throw new ToolError(`'${shown}' is not a regular file`);
    throw new ToolError(`'${shown}' cannot be opened for writing (${code || "error"})`);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new ToolError(`'${shown}' is not a regular file; only regular files are written`);
    if (LINUX) {
      const actual = await readlink(`/proc/self/fd/${handle.fd}`);
      if (!isInside(ws.root, actual.replace(/ \(deleted\)$/, "")))
        throw new ToolError(`path '${shown}' resolves outside the workspace (it changed after it was checked)`);
    }
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}
