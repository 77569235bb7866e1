/**
 * The sandbox every program the runtime starts runs in (script tasks, loop scripts, `file_paths` commands, the
 * model's `run_script`): `bwrap` (bubblewrap) with new PID, IPC and UTS namespaces (and a new network namespace
 * unless the network is allowed), all capabilities dropped, a fresh `/proc` of the new PID namespace (the
 * Handler's `/proc/<pid>/environ` is not there), a minimal `/dev`, an empty `/tmp`, the system directories and a
 * few files of `/etc` read-only, the workspace the only writable directory, and a cleared environment. Nothing
 * else of the host is mounted: no home directory, no data directory, no secret file. Killing `bwrap` kills the
 * whole PID namespace (`--die-with-parent`), so no process a program starts outlives its run.
 *
 * `unsandboxed` mode runs programs directly (same environment rules, no isolation); the operator must ask for it.
 */
import { execFile } from "node:child_process";
import { existsSync, lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { isInside } from "./workspace.js";
import { REFUSED_ENV, withoutRefused } from "../../actors/commands.js";
import type { SandboxMode } from "../../actors/handler/toolset.js";

export { REFUSED_ENV, withoutRefused };
export type { SandboxMode };

/** Top-level system directories bound read-only (or recreated as the symlinks they are on a merged-/usr system). */
export const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] as const;

/**
 * Files and directories of `/etc` a program may need (users and groups for `id`, name resolution, TLS roots, the
 * dynamic loader's cache, time zone, Debian's alternatives): bound read-only where they exist. The rest of `/etc`
 * is not there.
 */
export const ETC_ENTRIES = [
  "/etc/passwd",
  "/etc/group",
  "/etc/nsswitch.conf",
  "/etc/hosts",
  "/etc/host.conf",
  "/etc/resolv.conf",
  "/etc/gai.conf",
  "/etc/services",
  "/etc/protocols",
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/localtime",
  "/etc/timezone",
  "/etc/os-release",
  "/etc/mime.types",
  "/etc/alternatives",
  "/etc/ssl",
  "/etc/ca-certificates",
  "/etc/pki",
  "/etc/python3",
] as const;

/** One system path as the host has it. */
export type HostPath = { path: string; kind: "dir" | "file" } | { path: string; kind: "symlink"; target: string };

/** The host's system directories and `/etc` entries, as found at start. */
export interface HostLayout {
  system: HostPath[];
  etc: HostPath[];
}

function hostPath(path: string): HostPath | undefined {
  try {
    const info = lstatSync(path);
    if (info.isSymbolicLink()) return { path, kind: "symlink", target: readlinkSync(path) };
    return { path, kind: info.isDirectory() ? "dir" : "file" };
  } catch {
    return undefined;
  }
}

/**
 * An entry of `/etc`: a symlink into `/usr` stays a symlink (`/etc/localtime`); one that leads elsewhere (a
 * `resolv.conf` of `/run`) is bound by its target's content, since its target is not in the sandbox.
 */
function etcPath(path: string): HostPath | undefined {
  const found = hostPath(path);
  if (found?.kind !== "symlink") return found;
  try {
    const target = realpathSync(path);
    return isInside("/usr", target) ? found : { path, kind: statSync(target).isDirectory() ? "dir" : "file" };
  } catch {
    return undefined;
  }
}

/** Looks up the host's layout of {@link SYSTEM_DIRS} and {@link ETC_ENTRIES}. */
export function hostLayout(): HostLayout {
  const present = (entries: (HostPath | undefined)[]) => entries.filter((p): p is HostPath => p !== undefined);
  return { system: present(SYSTEM_DIRS.map(hostPath)), etc: present(ETC_ENTRIES.map(etcPath)) };
}

/** One program run to wrap. */
export interface SandboxRun {
  /** The workspace's real path: bound read-write at the same path. */
  workspace: string;
  /** The working directory (inside the workspace). */
  cwd: string;
  /** Program and arguments. */
  argv: readonly string[];
  /** The program's whole environment (already filtered). */
  env: Readonly<Record<string, string>>;
}

/** Settings of the sandbox, fixed for the life of a Handler. */
export interface SandboxSettings {
  /** `bwrap` (default) or `unsandboxed`. */
  mode: SandboxMode;
  /** Give programs the host's network (`true`) or none at all (`false`, a new network namespace). */
  network: boolean;
  /** Extra host paths bound read-only at the same path (an interpreter's virtualenv, a toolchain in `/opt`). */
  readOnly: readonly string[];
  /**
   * Paths that must never be visible even when a bound directory contains them: secret files (the NATS password
   * and creds files), the runtime's data directory. A directory is covered by an empty tmpfs, a file by `/dev/null`.
   */
  hidden: readonly string[];
  /** The `bwrap` program; `bwrap` on the PATH by default. */
  bwrapPath?: string;
}

/**
 * The arguments of `bwrap` for one run: namespaces, mounts, the cleared environment, then `--` and the argv. Pure:
 * `host` says what the host has, `hidden` lists the paths to cover with their kind.
 */
export function bwrapArgs(
  run: SandboxRun,
  settings: Pick<SandboxSettings, "network" | "readOnly">,
  host: HostLayout,
  hidden: readonly HostPath[] = [],
): string[] {
  const args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL"];
  if (!settings.network) args.push("--unshare-net");
  for (const entry of [...host.system, ...host.etc]) {
    if (entry.kind === "symlink") args.push("--symlink", entry.target, entry.path);
    else args.push("--ro-bind", entry.path, entry.path);
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  for (const path of settings.readOnly) args.push("--ro-bind-try", path, path);
  args.push("--bind", run.workspace, run.workspace);
  // After the binds, so a covered path inside a bound directory is covered in the sandbox.
  for (const entry of hidden) {
    if (entry.kind === "dir") args.push("--tmpfs", entry.path);
    else args.push("--ro-bind", "/dev/null", entry.path);
  }
  args.push("--chdir", run.cwd, "--clearenv");
  for (const [name, value] of Object.entries(run.env)) args.push("--setenv", name, value);
  args.push("--", ...run.argv);
  return args;
}

/** The paths of `hidden` that a bound directory of the sandbox contains, with their kind; the rest are not there anyway. */
export function coveredPaths(hidden: readonly string[], bound: readonly string[]): HostPath[] {
  const out: HostPath[] = [];
  for (const path of hidden) {
    // Covering a path that holds the workspace would hide the workspace itself.
    if (!bound.some((dir) => isInside(dir, path)) || bound.some((dir) => isInside(path, dir))) continue;
    try {
      out.push({ path, kind: statSync(path).isDirectory() ? "dir" : "file" });
    } catch {
      // Not there (yet): nothing to cover.
    }
  }
  return out;
}

/** What to spawn for one run. */
export interface Wrapped {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** A Handler's sandbox. */
export interface Sandbox {
  readonly mode: SandboxMode;
  /** Why programs cannot run (no working `bwrap`); undefined when they can. */
  readonly unavailable: string | undefined;
  /** What to spawn for `run`; throws when {@link unavailable}. */
  wrap(run: SandboxRun): Wrapped;
}

/** The message a refused run answers when the sandbox is missing. */
export function unavailableMessage(reason: string): string {
  return (
    `no sandbox to run programs in: ${reason}. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), ` +
    "or set DIRIGENT_SANDBOX=unsandboxed to run programs without isolation (not recommended)"
  );
}

/** Finds `name` on the PATH; undefined when it is not there. */
function onPath(name: string): string | undefined {
  if (name.includes("/")) return existsSync(name) ? name : undefined;
  for (const dir of (process.env["PATH"] ?? "/usr/bin:/bin").split(delimiter)) {
    const candidate = join(dir, name);
    if (dir !== "" && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Creates the sandbox of a Handler. In `bwrap` mode, runs `true` in a sandbox once to check that bubblewrap is
 * installed and may create namespaces here; when it cannot, {@link Sandbox.unavailable} says why.
 */
export async function createSandbox(settings: SandboxSettings): Promise<Sandbox> {
  if (settings.mode === "unsandboxed") {
    return {
      mode: "unsandboxed",
      unavailable: undefined,
      wrap: (run) => ({ command: run.argv[0] ?? "", args: run.argv.slice(1), env: { ...run.env } }),
    };
  }
  const host = hostLayout();
  const bwrap = onPath(settings.bwrapPath ?? "bwrap");
  const unavailable = bwrap === undefined ? `'${settings.bwrapPath ?? "bwrap"}' is not installed` : await probe(bwrap, settings, host);
  return {
    mode: "bwrap",
    unavailable,
    wrap(run) {
      if (unavailable !== undefined || bwrap === undefined) throw new Error(unavailableMessage(unavailable ?? "bwrap is missing"));
      const hidden = coveredPaths(settings.hidden, [run.workspace, ...settings.readOnly]);
      return { command: bwrap, args: bwrapArgs(run, settings, host, hidden), env: {} };
    },
  };
}

/** Runs `true` in the sandbox; the reason it failed, or undefined. */
function probe(bwrap: string, settings: SandboxSettings, host: HostLayout): Promise<string | undefined> {
  const args = bwrapArgs({ workspace: "/tmp", cwd: "/", argv: ["true"], env: { PATH: "/usr/bin:/bin" } }, settings, host);
  return new Promise((resolve) => {
    execFile(bwrap, args, { timeout: 10_000, env: {} }, (err, _stdout, stderr) => {
      if (!err) return resolve(undefined);
      const said = String(stderr).trim().split("\n")[0];
      resolve(`'${bwrap}' cannot create a sandbox here (${said || err.message})`);
    });
  });
}
