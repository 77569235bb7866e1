/**
 * Counts a process's socket writes by what each carried: preloaded into `dirigent up` by records-cost.mjs `--writes 1`
 * (`node --require …/count-writes.cjs`). A write to nats-server is named by the messages in it, in order (`PUB`/`HPUB`
 * subjects made generic by ./subject-names.cjs, as `--tap` names them: `R.tasks.<id>.events + $KV.R_TURNS.<id>.t<hash>`);
 * one to the model by its request line (`POST /v1/chat/completions`); anything else by its first bytes. Both
 * `_write` and `_writev` of `net.Socket` are counted (a `writev` as one write). On SIGUSR2 the counts so far are
 * written as JSON to the file `DIRIGENT_COUNT_WRITES` names: `{ "dump": n, "counts": { kind: count } }`;
 * `DIRIGENT_COUNT_WRITES_ROOT` is the subject root to make generic.
 *
 * With `DIRIGENT_WRITE_MARKS` (a file) it also marks the time of each write, and of the first data read on a socket
 * after an HTTP request was written on it (`answer to POST /v1/chat/completions`), on the clock of `node --cpu-prof`'s
 * samples (`process.hrtime`, in µs), and writes them on SIGUSR2 as `[[µs, kind], …]`: ./profile-summary.mjs
 * `--windows` splits a CPU profile of the process at these marks. Then a write is only kept as it goes out, and named
 * (and counted) at the dump, so that the naming's own CPU is not in the windows it marks.
 */
"use strict";
const net = require("node:net");
const { mkdirSync, writeFileSync } = require("node:fs");
const { dirname } = require("node:path");
const { genericSubject } = require("./subject-names.cjs");

const file = process.env.DIRIGENT_COUNT_WRITES;
const root = process.env.DIRIGENT_COUNT_WRITES_ROOT ?? "";
const counts = new Map();
const marksFile = process.env.DIRIGENT_WRITE_MARKS;
/**
 * With `DIRIGENT_WRITE_MARKS`: `[µs, chunks]` of each write not named yet, `[µs, kind]` once named (at the dump), and
 * `[µs, "answer to …"]` of each first answer to an HTTP request.
 */
const marks = [];
/** Marks before this one are named. */
let named = 0;
const now = () => Number(process.hrtime.bigint() / 1000n);

/** What one write carried. */
function kind(chunks) {
  const text = chunks.map((c) => (typeof c === "string" ? c : Buffer.from(c).toString("latin1"))).join("");
  const subjects = [...text.matchAll(/(?:^|\r\n)H?PUB ([^ \r\n]+)/g)].map((m) => genericSubject(m[1], root));
  if (subjects.length > 0) return subjects.join(" + ");
  const http = /^[A-Z]+ [^ \r\n]+ HTTP\/1\.1/.exec(text);
  if (http) return http[0].replace(/ HTTP\/1\.1$/, "");
  return text.slice(0, 16).replace(/\r\n/g, " ").trim() || "(empty)";
}

const tally = (k) => counts.set(k, (counts.get(k) ?? 0) + 1);

const count = (socket, chunks) => {
  if (marksFile === undefined) return void tally(kind(chunks));
  const mark = [now(), chunks];
  marks.push(mark);
  const first = chunks[0];
  const head =
    typeof first === "string"
      ? first.slice(0, 8)
      : Buffer.from(first.buffer, first.byteOffset, Math.min(8, first.byteLength)).toString("latin1");
  if (/^[A-Z]+ \//.test(head)) socket.once("data", () => marks.push([now(), () => `answer to ${kind(chunks)}`]));
};

/** Names the marks kept since the last dump, and counts their writes. */
function nameMarks() {
  for (; named < marks.length; named++) {
    const mark = marks[named];
    if (typeof mark[1] === "function") mark[1] = mark[1]();
    else {
      mark[1] = kind(mark[1]);
      tally(mark[1]);
    }
  }
}
const write = net.Socket.prototype._write;
net.Socket.prototype._write = function countedWrite(chunk, encoding, callback) {
  count(this, [chunk]);
  return write.call(this, chunk, encoding, callback);
};
const writev = net.Socket.prototype._writev;
net.Socket.prototype._writev = function countedWritev(chunks, callback) {
  count(
    this,
    chunks.map((c) => c.chunk),
  );
  return writev.call(this, chunks, callback);
};

let dumps = 0;
process.on("SIGUSR2", () => {
  // The marks first: a reader waits for the counts' dump number, then may stop the process.
  if (marksFile) {
    nameMarks();
    mkdirSync(dirname(marksFile), { recursive: true });
    writeFileSync(marksFile, JSON.stringify(marks));
  }
  if (file) writeFileSync(file, JSON.stringify({ dump: ++dumps, counts: Object.fromEntries(counts) }));
});
