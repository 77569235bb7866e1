/**
 * The critical-path tooling of the user-level bench: ./count-writes.cjs marks a process's socket writes (and each first
 * answer to an HTTP request) in time, and ./profile-summary.mjs `--windows` splits a CPU profile at those marks.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "dirigent-windows-"));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * A profile of 30 cycles of 100 µs: mark A at the cycle's start, mark B 60 µs in; a sample every 10 µs, in XState
 * from A to B, then two in dirigent's Evaluator and two idle (four in the Evaluator in the first 3 cycles).
 */
function syntheticProfile(dir: string): { profile: string; marks: string } {
  const frame = (id: number, functionName: string, url: string) => ({
    id,
    callFrame: { functionName, url, scriptId: "0", lineNumber: 0, columnNumber: 0 },
  });
  const nodes = [
    { ...frame(1, "(root)", ""), children: [2, 3, 4] },
    frame(2, "(idle)", ""),
    frame(3, "microstep", "file:///app/node_modules/xstate/dist/raise.cjs.js"),
    frame(4, "walk", "file:///app/dist/actors/evaluator/walk.js"),
  ];
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  const marks: [number, string][] = [];
  for (let cycle = 0; cycle < 30; cycle++) {
    marks.push([cycle * 100, "A"], [cycle * 100 + 60, "B"]);
    for (let j = 0; j < 10; j++) {
      // The first 3 cycles are busier (a first run's compiles): left out with the first 10 windows of each kind.
      samples.push(j < 6 ? 3 : j < 8 || cycle < 3 ? 4 : 2);
      timeDeltas.push(samples.length === 1 ? 5 : 10);
    }
  }
  const profile = join(dir, "synthetic.cpuprofile");
  writeFileSync(profile, JSON.stringify({ nodes, startTime: 0, endTime: 3000, samples, timeDeltas }));
  const marksFile = join(dir, "marks.json");
  writeFileSync(marksFile, JSON.stringify(marks));
  return { profile, marks: marksFile };
}

/** The rows of the windows table: kind, times, median length, CPU per window, owners. */
function windowRows(output: string): string[][] {
  const table = output.slice(output.indexOf("| window (from one mark to the next)"));
  return table
    .split("\n")
    .slice(2)
    .filter((line) => line.startsWith("| "))
    .map((line) =>
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

describe("profile-summary.mjs --windows", () => {
  it("splits a profile's CPU at the marks, by kind of window and owner, leaving the first 10 of each kind out", () => {
    const dir = tempDir();
    const { profile, marks } = syntheticProfile(dir);
    const output = execFileSync(process.execPath, [here("profile-summary.mjs"), profile, "--windows", marks], { encoding: "utf8" });
    expect(windowRows(output)).toEqual([
      ["A → B", "30", "60", "60", "xstate 60"],
      ["B → A", "29", "40", "20", "dirigent actors/evaluator/ 20"],
    ]);
  });

  it("gives the windows' lengths alone when no profile is given", () => {
    const dir = tempDir();
    const { marks } = syntheticProfile(dir);
    const output = execFileSync(process.execPath, [here("profile-summary.mjs"), "--windows", marks], { encoding: "utf8" });
    // Most time first: 30 windows of 60 µs, then 29 of 40.
    expect(windowRows(output)).toEqual([
      ["A → B", "30", "60"],
      ["B → A", "29", "40"],
    ]);
  });
});

describe("count-writes.cjs marks", () => {
  it("marks each write by what it carried, and the first answer to an HTTP request, in time order", async () => {
    const dir = tempDir();
    const marksFile = join(dir, "run", "marks.json");
    const countsFile = join(dir, "counts.json");
    // A process writing a NATS publish and an HTTP request to a server of its own, which answers the request; then it
    // asks its preload for the marks (SIGUSR2) and ends once they are written.
    const script = `
      const net = require("node:net");
      const fs = require("node:fs");
      const server = net.createServer((socket) => socket.on("data", (data) => {
        if (String(data).includes("POST /")) socket.write("HTTP/1.1 200 OK\\r\\ncontent-length: 0\\r\\n\\r\\n");
      }));
      server.listen(0, "127.0.0.1", () => {
        const client = net.connect(server.address().port, "127.0.0.1", () => {
          // The request once the publish is written: two writes, not one writev of both.
          client.write("PUB tt.tasks.b-00000000-0000-4000-8000-000000000001.events 2\\r\\nhi\\r\\n", () =>
            client.write("POST /v1/chat/completions HTTP/1.1\\r\\nhost: x\\r\\ncontent-length: 0\\r\\n\\r\\n"),
          );
          client.once("data", () => setImmediate(() => {
            process.kill(process.pid, "SIGUSR2");
            const done = () => (fs.existsSync(${JSON.stringify(countsFile)}) ? (client.destroy(), server.close()) : setImmediate(done));
            done();
          }));
        });
      });`;
    await promisify(execFile)(process.execPath, ["--require", here("count-writes.cjs"), "-e", script], {
      env: { ...process.env, DIRIGENT_COUNT_WRITES: countsFile, DIRIGENT_COUNT_WRITES_ROOT: "tt", DIRIGENT_WRITE_MARKS: marksFile },
    });
    const marks = JSON.parse(readFileSync(marksFile, "utf8")) as [number, string][];
    // The server's answer is a write of the same process too: named by its first bytes.
    expect(marks.map(([, kind]) => kind)).toEqual([
      "R.tasks.<id>.events",
      "POST /v1/chat/completions",
      "HTTP/1.1 200 OK",
      "answer to POST /v1/chat/completions",
    ]);
    const times = marks.map(([at]) => at);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    const counts = JSON.parse(readFileSync(countsFile, "utf8")) as { dump: number; counts: Record<string, number> };
    expect(counts).toEqual({
      dump: 1,
      counts: { "R.tasks.<id>.events": 1, "POST /v1/chat/completions": 1, "HTTP/1.1 200 OK": 1 },
    });
  });
});
