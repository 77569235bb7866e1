/**
 * `npm test` first checks the OS programs the suite needs (test/os-prereqs.sh, also run by .ci/run): a missing one is
 * installed with apt-get where the script may (root), and otherwise the script stops with the command to run. Run
 * here with a PATH of stand-ins, so bwrap and prometheus are missing whatever this machine has.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const SCRIPT = join(import.meta.dirname, "../os-prereqs.sh");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A directory of stand-in programs: `id` answering `uid`, and an `apt-get` that writes its arguments to a file. */
function fakeBin(uid: number, withApt: boolean): { bin: string; aptLog: string } {
  const bin = mkdtempSync(join(tmpdir(), "dirigent-prereqs-"));
  dirs.push(bin);
  const aptLog = join(bin, "apt.log");
  writeFileSync(join(bin, "id"), `#!/bin/bash\necho ${uid}\n`);
  chmodSync(join(bin, "id"), 0o755);
  if (withApt) {
    writeFileSync(join(bin, "apt-get"), `#!/bin/bash\necho "$*" >> ${aptLog}\n`);
    chmodSync(join(bin, "apt-get"), 0o755);
  }
  return { bin, aptLog };
}

const runScript = (bin: string) => spawnSync("/bin/bash", [SCRIPT], { env: { PATH: bin }, encoding: "utf8" });

describe("test/os-prereqs.sh", () => {
  it("as root with apt-get, installs what is missing", () => {
    const { bin, aptLog } = fakeBin(0, true);
    const run = runScript(bin);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/missing bubblewrap: every program a Handler runs is sandboxed with bwrap/);
    const calls = readFileSync(aptLog, "utf8").trim().split("\n");
    expect(calls[0]).toBe("update -qq");
    expect(calls[1]).toMatch(/^install -y -qq --no-install-recommends .*\bbubblewrap\b.*\bprometheus\b/);
  });

  it("elsewhere, stops before any test with the command to run", () => {
    const user = runScript(fakeBin(1000, true).bin);
    expect(user.status).toBe(1);
    expect(user.stderr).toMatch(/install them first, then run npm test again:\n  sudo apt-get install -y .*bubblewrap.*prometheus/);
    const noApt = runScript(fakeBin(0, false).bin);
    expect(noApt.status).toBe(1);
    expect(noApt.stderr).toMatch(/the Debian\/Ubuntu packages .*bubblewrap.*prometheus/);
  });
});
