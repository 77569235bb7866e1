/**
 * The workspace root that confines the Handler's file and script tools. A path given by the model is resolved
 * against the root, then checked twice: lexically (no `..` escape, no absolute path elsewhere) and after
 * `realpath` (no symlink pointing out).
 */
import { realpath } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";

/** A tool could not do what the model asked; its message goes back to the model as the tool's answer. */
export class ToolError extends Error {
  override name = "ToolError";
}

/** A directory the tools may not leave. */
export interface Workspace {
  /** The real path of the root (symlinks resolved). */
  readonly root: string;
  /**
   * Resolves a path given by the model to a real path inside the root.
   * @throws {ToolError} when the path leaves the workspace or does not exist.
   */
  resolve(path: string): Promise<string>;
  /** The path relative to the root, as shown to the model (`.` for the root). */
  display(realPath: string): string;
}

/** True when `path` is `root` or below it. Both must be absolute and normalised. */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** Opens a workspace at `root` (which must exist). */
export async function openWorkspace(root: string): Promise<Workspace> {
  const real = await realpath(resolve(root));
  return {
    root: real,
    async resolve(path) {
      const wanted = isAbsolute(path) ? resolve(path) : resolve(real, path);
      if (!isInside(real, wanted)) throw new ToolError(`path '${path}' is outside the workspace`);
      let target: string;
      try {
        target = await realpath(wanted);
      } catch (err) {
        const code = err instanceof Error && "code" in err ? String(err.code) : "";
        throw new ToolError(code === "ENOENT" ? `path '${path}' does not exist` : `path '${path}' cannot be resolved (${code || "error"})`);
      }
      // The lexical check passed, so only a symlink on the way can lead out.
      if (!isInside(real, target)) throw new ToolError(`path '${path}' resolves outside the workspace (symlink)`);
      return target;
    },
    display(realPath) {
      return relative(real, realPath) || ".";
    },
  };
}
