/**
 * `read_file` and `list_files`: read-only views of the workspace, with size and entry caps so that one tool
 * answer cannot flood the model's context.
 */
import { open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { ToolError, type Workspace } from "./workspace.js";

/** Caps of the file tools. */
export interface FileToolLimits {
  /** Largest number of bytes one `read_file` returns; the rest is cut with a note. */
  readMaxBytes: number;
  /** Largest number of entries one `list_files` returns. */
  listMaxEntries: number;
}

/** Reads a text file of the workspace, at most `readMaxBytes` of it from `offset`. */
export async function readWorkspaceFile(ws: Workspace, limits: FileToolLimits, args: { path: string; offset?: number | undefined }): Promise<string> {
  const path = await ws.resolve(args.path);
  const handle = await open(path, "r");
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new ToolError(`'${args.path}' is not a regular file`);
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
export async function listWorkspaceFiles(ws: Workspace, limits: FileToolLimits, args: { path?: string | undefined; recursive?: boolean | undefined }): Promise<string> {
  const start = await ws.resolve(args.path ?? ".");
  const lines: string[] = [];
  const queue = [start];
  let truncated = false;
  while (queue.length > 0 && !truncated) {
    const dir = queue.shift() ?? start;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (dir === start) throw new ToolError(`'${args.path ?? "."}' is not a readable directory`, { cause: err });
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
