import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runScript, type ScriptLimits } from "../../../runtime/tools/run-script.js";
import { bwrapArgs, coveredPaths, createSandbox, REFUSED_ENV, type HostLayout, type Sandbox } from "../../../runtime/tools/sandbox.js";
import { openWorkspace, type Workspace } from "../../../runtime/tools/workspace.js";

const host: HostLayout = {
  system: [
    { path: "/usr", kind: "dir" },
    { path: "/bin", kind: "symlink", target: "usr/bin" },
  ],
  etc: [{ path: "/etc/passwd", kind: "file" }],
};
const run = { workspace: "/srv/ws", cwd: "/srv/ws/sub", argv: ["python3", "-c", "print(1)"], env: { PATH: "/usr/bin", LANG: "C.UTF-8" } };

/** The values following each occurrence of `flag` in `args`, `n` at a time. */
function after(args: readonly string[], flag: string, n = 1): string[][] {
  const out: string[][] = [];
  args.forEach((a, i) => {
    if (a === flag) out.push(args.slice(i + 1, i + 1 + n));
  });
  return out;
}

describe("bwrapArgs", () => {
  it("builds new namespaces that die with the Handler, no capabilities and no network by default", () => {
    const args = bwrapArgs(run, { network: false, readOnly: [] }, host);
    for (const flag of ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent", "--new-session"])
      expect(args).toContain(flag);
    expect(after(args, "--cap-drop")).toEqual([["ALL"]]);
    expect(bwrapArgs(run, { network: true, readOnly: [] }, host)).not.toContain("--unshare-net");
  });

  it("mounts the system read-only, a fresh /proc, /dev and /tmp, and only the workspace writable", () => {
    const args = bwrapArgs(run, { network: false, readOnly: ["/opt/venv"] }, host);
    expect(after(args, "--ro-bind", 2)).toEqual([
      ["/usr", "/usr"],
      ["/etc/passwd", "/etc/passwd"],
    ]);
    expect(after(args, "--symlink", 2)).toEqual([["usr/bin", "/bin"]]);
    expect(after(args, "--proc")).toEqual([["/proc"]]);
    expect(after(args, "--dev")).toEqual([["/dev"]]);
    expect(after(args, "--tmpfs")).toEqual([["/tmp"]]);
    expect(after(args, "--ro-bind-try", 2)).toEqual([["/opt/venv", "/opt/venv"]]);
    expect(after(args, "--bind", 2)).toEqual([["/srv/ws", "/srv/ws"]]);
    expect(after(args, "--chdir")).toEqual([["/srv/ws/sub"]]);
    // /tmp is mounted before the workspace, so a workspace under /tmp is not covered by it.
    expect(args.indexOf("--tmpfs")).toBeLessThan(args.indexOf("--bind"));
  });

  it("clears the environment and sets only the given variables, then runs the argv after --", () => {
    const args = bwrapArgs(run, { network: false, readOnly: [] }, host);
    expect(args).toContain("--clearenv");
    expect(after(args, "--setenv", 2)).toEqual([
      ["PATH", "/usr/bin"],
      ["LANG", "C.UTF-8"],
    ]);
    expect(args.indexOf("--clearenv")).toBeLessThan(args.indexOf("--setenv"));
    expect(args.slice(args.indexOf("--") + 1)).toEqual(run.argv);
  });

  it("covers hidden paths inside bound directories after the binds: a directory by a tmpfs, a file by /dev/null", () => {
    const args = bwrapArgs(run, { network: false, readOnly: [] }, host, [
      { path: "/srv/ws/.dirigent", kind: "dir" },
      { path: "/srv/ws/nats.pass", kind: "file" },
    ]);
    expect(after(args, "--tmpfs")).toEqual([["/tmp"], ["/srv/ws/.dirigent"]]);
    expect(after(args, "--ro-bind", 2)).toContainEqual(["/dev/null", "/srv/ws/nats.pass"]);
    expect(args.lastIndexOf("--tmpfs")).toBeGreaterThan(args.indexOf("--bind"));
  });

  it("refuses variables that change which code runs, and the runtime's secrets", () => {
    for (const name of [
      "LD_PRELOAD",
      "LD_LIBRARY_PATH",
      "DYLD_INSERT_LIBRARIES",
      "NODE_OPTIONS",
      "NODE_PATH",
      "PYTHONPATH",
      "PYTHONSTARTUP",
      "PERL5LIB",
      "PERL5OPT",
      "JAVA_TOOL_OPTIONS",
      "GIT_DIR",
      "GIT_SSH_COMMAND",
      "BASH_ENV",
      "ENV",
      "OPENAI_API_KEY",
      "NATS_PASSWORD",
      "NATS_TOKEN",
    ]) {
      expect(REFUSED_ENV.test(name), name).toBe(true);
    }
    for (const name of ["PATH", "HOME", "LANG", "ENVIRONMENT", "MY_ENV", "GITHUB_SHA"]) expect(REFUSED_ENV.test(name), name).toBe(false);
  });
});

describe("the bubblewrap sandbox", () => {
  let dir: string;
  let outside: string;
  let ws: Workspace;
  let sandbox: Sandbox;
  const limits: ScriptLimits = {
    scriptTimeoutMs: 10_000,
    scriptKillGraceMs: 200,
    scriptOutputMaxBytes: 100_000,
    scriptEnv: ["PATH", "HOME", "NODE_OPTIONS", "DIRIGENT_TEST_SB"],
  };
  const never = new AbortController().signal;
  const sh = (script: string, env?: Record<string, string>) =>
    runScript(ws, limits, { argv: ["sh", "-c", script], ...(env ? { env } : {}) }, never, sandbox);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dirigent-sandbox-"));
    outside = await mkdtemp(join(tmpdir(), "dirigent-outside-"));
    await writeFile(join(outside, "secret.txt"), "outside-secret");
    await mkdir(join(dir, "data"));
    await writeFile(join(dir, "data", "store"), "data-dir-content");
    await writeFile(join(dir, "nats.pass"), "password-in-workspace");
    ws = await openWorkspace(dir);
    sandbox = await createSandbox({
      mode: "bwrap",
      network: false,
      readOnly: [],
      hidden: [join(ws.root, "data"), join(ws.root, "nats.pass"), join(outside, "secret.txt")],
    });
    expect(sandbox.unavailable).toBeUndefined();
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  it("writes only in the workspace; the rest of the host is read-only or absent", async () => {
    const out = await sh(
      `echo ok > made.txt; cat made.txt; echo x > /usr/x 2>/dev/null || echo usr-ro; cat ${outside}/secret.txt 2>/dev/null || echo outside-absent; ls /root 2>/dev/null || echo no-home; ls /etc`,
    );
    const lines = out.stdout.trim().split("\n");
    expect(lines.slice(0, 4)).toEqual(["ok", "usr-ro", "outside-absent", "no-home"]);
    expect(lines.slice(4)).not.toContain("shadow");
    expect(lines.slice(4)).toContain("passwd");
  });

  it("hides the data directory and secret files even inside the workspace", async () => {
    const out = await sh("ls -A data; cat nats.pass; echo end");
    expect(out.stdout).toBe("end\n");
  });

  it("shows a /proc of its own PID namespace only: no Handler, no environment of the Handler", async () => {
    process.env["DIRIGENT_TEST_HIDDEN_SB"] = "hidden-sb-value";
    try {
      const out = await sh("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; cat /proc/[0-9]*/environ | tr '\\0' '\\n'");
      expect(out.stdout).not.toContain("vitest");
      expect(out.stdout).not.toContain(String(process.argv[1]));
      expect(out.stdout).not.toContain("hidden-sb-value");
      expect(out.stdout).toContain("bwrap");
    } finally {
      delete process.env["DIRIGENT_TEST_HIDDEN_SB"];
    }
  });

  it("passes only the allowlist, never a variable that changes which code runs, whichever way it comes", async () => {
    process.env["DIRIGENT_TEST_SB"] = "visible";
    process.env["NODE_OPTIONS"] = "--require /nonexistent.js";
    try {
      const out = await runScript(
        ws,
        limits,
        { argv: ["env"], env: { LD_PRELOAD: "/tmp/evil.so", PYTHONPATH: "/tmp", OWN: "mine" } },
        never,
        sandbox,
      );
      const names = out.stdout
        .trim()
        .split("\n")
        .map((l) => l.split("=")[0])
        .sort();
      // bwrap sets PWD to the working directory.
      expect(names).toEqual(["DIRIGENT_TEST_SB", "HOME", "OWN", "PATH", "PWD"]);
      expect(out.stdout).toContain("HOME=/tmp\n");
    } finally {
      delete process.env["DIRIGENT_TEST_SB"];
      delete process.env["NODE_OPTIONS"];
    }
  });

  it("has no network but loopback by default", async () => {
    const out = await sh("cat /proc/net/dev");
    const interfaces = out.stdout
      .split("\n")
      .slice(2)
      .map((l) => l.split(":")[0]?.trim())
      .filter((n) => n);
    expect(interfaces).toEqual(["lo"]);
  });

  it("reports a program it cannot find", async () => {
    await expect(runScript(ws, limits, { argv: ["no-such-program-xyz"] }, never, sandbox)).rejects.toThrow(
      /cannot run 'no-such-program-xyz': No such file or directory/,
    );
  });

  it("refuses every program, saying how to install bubblewrap, when bwrap is missing", async () => {
    const missing = await createSandbox({ mode: "bwrap", network: false, readOnly: [], hidden: [], bwrapPath: "/nonexistent/bwrap" });
    expect(missing.unavailable).toMatch(/not installed/);
    await expect(runScript(ws, limits, { argv: ["true"] }, never, missing)).rejects.toThrow(
      /apt-get install bubblewrap.*DIRIGENT_SANDBOX=unsandboxed/,
    );
  });

  it("covers only hidden paths that a bound directory holds, and never the workspace itself", () => {
    expect(coveredPaths([join(ws.root, "data"), join(outside, "secret.txt"), ws.root, tmpdir()], [ws.root]).map((p) => p.path)).toEqual([
      join(ws.root, "data"),
    ]);
  });
});
