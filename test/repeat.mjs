#!/usr/bin/env node
/**
 * `npm run test:repeat -- [--runs N] [--burn] [--from DIR|URL] [--ref REF] [--keep] [-- vitest args…]`
 *
 * Runs the whole suite N times in a row (default 5) from a fresh clone of the repository's committed HEAD (or
 * `--ref`), as CI does: `git clone`, `npm ci`, then `npm test` once per run. With `--burn`, a process spins on one
 * core for the whole of every run, so a test that passes only on a fast or idle machine shows up. Prints, for every
 * run, its exit code, duration and failed tests, then a table of failures per test over all runs, and writes the
 * same summary as Markdown to `repeat-summary.md` in the clone's parent directory (printed at the end).
 *
 * Uncommitted changes are not in the clone: commit first. The clone is removed at the end unless `--keep`.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir, availableParallelism, cpus } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(fileURLToPath(new URL("..", import.meta.url)));

function parseArgs(argv) {
  const options = { runs: 5, burn: false, from: repo, ref: "HEAD", keep: false, vitest: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${arg} needs a value`);
      return v;
    };
    if (arg === "--runs") {
      options.runs = Number(value());
      if (!Number.isInteger(options.runs) || options.runs < 1 || options.runs > 1000) usage("--runs must be an integer from 1 to 1000");
    } else if (arg === "--burn") options.burn = true;
    else if (arg === "--from") options.from = value();
    else if (arg === "--ref") options.ref = value();
    else if (arg === "--keep") options.keep = true;
    else if (arg === "--") ((options.vitest = argv.slice(i + 1)), (i = argv.length));
    else if (arg === "--help" || arg === "-h") usage();
    else usage(`unknown option ${arg}`);
  }
  return options;
}

function usage(problem) {
  const text = [
    "usage: npm run test:repeat -- [--runs N] [--burn] [--from DIR|URL] [--ref REF] [--keep] [-- vitest args…]",
    "  --runs N   full suites in a row (default 5)",
    "  --burn     spin one core for the whole of every run",
    "  --from     the repository to clone (default: this one)",
    "  --ref      the commit or branch to test (default HEAD)",
    "  --keep     keep the clone and its per-run reports",
    "  -- …       passed to vitest (e.g. a test file, to repeat only it)",
  ].join("\n");
  if (problem) {
    process.stderr.write(`test:repeat: ${problem}\n${text}\n`);
    process.exit(2);
  }
  process.stdout.write(`${text}\n`);
  process.exit(0);
}

/** Runs a command, its output passed through (or to `log`), and resolves with its exit code. */
function run(command, args, { cwd, log, env } = {}) {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: log ? ["ignore", "pipe", "pipe"] : "inherit" });
    if (log) {
      child.stdout.on("data", (d) => log.push(d));
      child.stderr.on("data", (d) => log.push(d));
    }
    child.on("error", fail);
    child.on("close", (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
}

/** A process spinning on one core until stopped. */
function startBurner() {
  const child = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
  return () => child.kill("SIGKILL");
}

/** The failed tests of a vitest JSON report: `file › full name`, with the first line of the failure. */
async function failuresOf(reportFile, cwd) {
  if (!existsSync(reportFile)) return undefined;
  const report = JSON.parse(await readFile(reportFile, "utf8"));
  const failed = [];
  for (const file of report.testResults ?? []) {
    const name = file.name.startsWith(cwd) ? file.name.slice(cwd.length + 1) : file.name;
    const tests = (file.assertionResults ?? []).filter((t) => t.status === "failed");
    for (const t of tests) failed.push({ test: `${name} › ${t.fullName}`, why: firstLine(t.failureMessages?.[0]) });
    // A file that failed outside its tests (a hook, an import) has no failed test of its own.
    if (file.status === "failed" && tests.length === 0) failed.push({ test: `${name} › (file)`, why: firstLine(file.message) });
  }
  return failed;
}

const firstLine = (text) =>
  String(text ?? "")
    .split("\n")
    .find((l) => l.trim() !== "")
    ?.trim()
    .slice(0, 200) ?? "";

const minutes = (ms) => `${(ms / 60_000).toFixed(1)} min`;

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const parent = await mkdtemp(join(tmpdir(), "dirigent-repeat-"));
  const clone = join(parent, "dirigent");
  const say = (line) => process.stdout.write(`test:repeat: ${line}\n`);
  const cores = typeof availableParallelism === "function" ? availableParallelism() : cpus().length;
  say(
    `${options.runs} run(s) of the whole suite from a fresh clone of ${options.from} at ${options.ref}` +
      `${options.burn ? ", one core of " + cores + " burnt" : ""}; clone in ${clone}`,
  );
  if (options.from === repo) {
    const dirty = [];
    await run("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: repo, log: dirty });
    if (Buffer.concat(dirty).length > 0) say("note: this checkout has uncommitted changes; they are not in the clone");
  }
  if ((await run("git", ["clone", "--quiet", options.from, clone])) !== 0) throw new Error("git clone failed");
  if ((await run("git", ["checkout", "--quiet", options.ref], { cwd: clone })) !== 0) throw new Error(`no such ref: ${options.ref}`);
  const head = [];
  await run("git", ["log", "-1", "--format=%h %s"], { cwd: clone, log: head });
  say(`testing ${Buffer.concat(head).toString().trim()}`);
  if ((await run("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: clone })) !== 0) throw new Error("npm ci failed");

  const runs = [];
  for (let n = 1; n <= options.runs; n++) {
    const report = join(parent, `run-${n}.json`);
    const stopBurner = options.burn ? startBurner() : () => {};
    const started = Date.now();
    say(`run ${n}/${options.runs} started at ${new Date(started).toISOString()}`);
    const args = ["test", "--", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...options.vitest];
    const code = await run("npm", args, { cwd: clone }).finally(stopBurner);
    const ms = Date.now() - started;
    const failed = (await failuresOf(report, clone)) ?? [{ test: "(no report: the build, typecheck or format check failed)", why: "" }];
    runs.push({ n, code, ms, failed });
    say(`run ${n}/${options.runs}: exit ${code}, ${minutes(ms)}, ${failed.length} failed`);
    for (const f of failed) say(`  ✗ ${f.test}: ${f.why}`);
  }

  const perTest = new Map();
  for (const r of runs) for (const f of r.failed) perTest.set(f.test, [...(perTest.get(f.test) ?? []), r.n]);
  const lines = [
    `# test:repeat: ${runs.length} full suite(s)${options.burn ? " under a one-core burner" : ""}`,
    "",
    `Commit ${Buffer.concat(head).toString().trim()}; ${cores} cores; Node ${process.version}; ${new Date().toISOString()}.`,
    "",
    "| run | exit | duration | failed tests |",
    "| --- | --- | --- | --- |",
    ...runs.map((r) => `| ${r.n} | ${r.code} | ${minutes(r.ms)} | ${r.failed.length} |`),
    "",
    perTest.size === 0 ? "No test failed in any run." : "| test | failed in runs |\n| --- | --- |",
    ...[...perTest].sort((a, b) => b[1].length - a[1].length).map(([test, ns]) => `| ${test} | ${ns.join(", ")} |`),
    "",
  ];
  const summary = join(parent, "repeat-summary.md");
  await writeFile(summary, lines.join("\n"));
  process.stdout.write(`\n${lines.join("\n")}\n`);
  say(`summary written to ${summary}`);
  if (!options.keep) await rm(clone, { recursive: true, force: true });
  process.exit(runs.every((r) => r.code === 0) ? 0 : 1);
}

main().catch((error) => {
  process.stderr.write(`test:repeat: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
