/**
 * Counts a process's socket writes by what each carried: preloaded into `dirigent up` by records-cost.mjs `--writes 1`
 * (`node --require …/count-writes.cjs`). A write to nats-server is named by the messages in it, in order (`PUB`/`HPUB`
 * subjects made generic by ./subject-names.cjs, as `--tap` names them: `R.tasks.<id>.events + $KV.R_TURNS.<id>.t<hash>`);
 * one to the model by its request line (`POST /v1/chat/completions`); anything else by its first bytes. Both
 * `_write` and `_writev` of `net.Socket` are counted (a `writev` as one write). On SIGUSR2 the counts so far are
 * written as JSON to the file `DIRIGENT_COUNT_WRITES` names: `{ "dump": n, "counts": { kind: count } }`;
 * `DIRIGENT_COUNT_WRITES_ROOT` is the subject root to make generic.
 */
"use strict";
const net = require("node:net");
const { writeFileSync } = require("node:fs");
const { genericSubject } = require("./subject-names.cjs");

const file = process.env.DIRIGENT_COUNT_WRITES;
const root = process.env.DIRIGENT_COUNT_WRITES_ROOT ?? "";
const counts = new Map();

/** What one write carried. */
function kind(chunks) {
  const text = chunks.map((c) => (typeof c === "string" ? c : Buffer.from(c).toString("latin1"))).join("");
  const subjects = [...text.matchAll(/(?:^|\r\n)H?PUB ([^ \r\n]+)/g)].map((m) => genericSubject(m[1], root));
  if (subjects.length > 0) return subjects.join(" + ");
  const http = /^[A-Z]+ [^ \r\n]+ HTTP\/1\.1/.exec(text);
  if (http) return http[0].replace(/ HTTP\/1\.1$/, "");
  return text.slice(0, 16).replace(/\r\n/g, " ").trim() || "(empty)";
}

const count = (chunks) => {
  const k = kind(chunks);
  counts.set(k, (counts.get(k) ?? 0) + 1);
};
const write = net.Socket.prototype._write;
net.Socket.prototype._write = function countedWrite(chunk, encoding, callback) {
  count([chunk]);
  return write.call(this, chunk, encoding, callback);
};
const writev = net.Socket.prototype._writev;
net.Socket.prototype._writev = function countedWritev(chunks, callback) {
  count(chunks.map((c) => c.chunk));
  return writev.call(this, chunks, callback);
};

let dumps = 0;
process.on("SIGUSR2", () => {
  if (file) writeFileSync(file, JSON.stringify({ dump: ++dumps, counts: Object.fromEntries(counts) }));
});
