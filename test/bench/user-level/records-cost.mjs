/**
 * What the node records cost a task (issue 32), counted as well as timed: `dirigent up` of several builds
 * (`--a DIR --b DIR`, or `--variants NAME=DIR,NAME=DIR,…`: repositories with `dist/` built, e.g. the commit before the
 * records and this one) on one nats-server, each in turn (A B, B A, …) for `--rounds` rounds, each run after a
 * warm-up (`--warmup`): `--throughput N` one-call tasks at once (concurrency 64, as the user-level bench's row 11),
 * then one at a time `--tasks` one-call tasks (row 12) and `--seq` sequential tasks of 10 steps (row 13), every
 * step one model call to the user-level bench's model server. Per task: the `up` process's CPU and nats-server's
 * (from /proc, ticks of 10 ms), the messages and bytes the server received and sent (`/varz`), the JetStream stores
 * in each stream of the variant (`/jsz`: the streams' last sequence), and the wall figures (tasks/s, p50: meaningful
 * only on a quiet machine). `--tap 1` counts every message by subject (`--samples 1` prints the largest of each,
 * `--order 1` each event), `--prof DIR` runs `up` under `node --cpu-prof`, `--actors 1` counts the XState actors `up`
 * starts per task, by kind (root or child, machine id or invoked `src`; ./count-actors.cjs), `--writes 1` its socket
 * writes per task, by the messages each carried (./count-writes.cjs), and with `--prof DIR` or `--marks DIR` marks each
 * write in time beside the profile (`profile-summary.mjs --windows`: a task's critical path). A variant
 * `NAME=DIR@VAR+VAR` runs its `up` with those environment variables set to 1, and under `node $NODE_ARGS_<NAME>` when
 * that is set (e.g. `NODE_ARGS_gc=--single-threaded-gc` with `--variants head=.,gc=.`).
 *
 *   node test/bench/user-level/records-cost.mjs --a /tmp/base --b . --throughput 1000 --tasks 200 --seq 50 --rounds 3
 */
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { genericSubject } from "./subject-names.cjs";

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .join(" ")
    .split(/\s*--/)
    .filter(Boolean)
    .map((a) => a.split(/\s+/)),
);
/**
 * The builds compared, by name: `--a DIR --b DIR`, or `--variants NAME=DIR,NAME=DIR@VAR+VAR,…` (`@`: environment
 * variables set to 1 for that variant's `up`).
 */
const variants = args.variants
  ? Object.fromEntries(args.variants.split(",").map((v) => [v.split("=")[0], resolve(v.split("=")[1].split("@")[0])]))
  : { A: resolve(args.a ?? "."), B: resolve(args.b ?? ".") };
const variantEnv = Object.fromEntries(
  (args.variants ?? "").split(",").map((v) => [
    v.split("=")[0],
    Object.fromEntries(
      (v.split("@")[1] ?? "")
        .split("+")
        .filter(Boolean)
        .map((k) => [k, "1"]),
    ),
  ]),
);
const names = Object.keys(variants);
const TASKS = Number(args.tasks ?? 200);
const SEQ = Number(args.seq ?? 30);
const ROUNDS = Number(args.rounds ?? 2);
const WARMUP = Number(args.warmup ?? 50);
/** One-call tasks submitted at once (`up --concurrency 64`), as the user-level bench's row 11; 0: none. */
const THROUGHPUT = Number(args.throughput ?? 0);
const PROF = args.prof ? resolve(args.prof) : undefined;
/** Count the actors `up` starts (./count-actors.cjs, asked for its counts with SIGUSR2). */
const ACTORS = Boolean(args.actors);
/** Count `up`'s socket writes by what they carried (./count-writes.cjs, asked the same way). */
const WRITES = Boolean(args.writes);
/**
 * Where `up`'s writes are marked in time (./count-writes.cjs), one directory per run: `--marks DIR`, or with
 * `--writes 1 --prof DIR` beside the profile. `profile-summary.mjs --windows` splits the profile at them.
 */
const MARKS = args.marks ? resolve(args.marks) : PROF;
const here = (file) => fileURLToPath(new URL(file, import.meta.url));
const TICK_US = 10_000;

const ONE = '<task type="atomic"><description>Answer with the word ok.</description></task>';
const step = (i) => `    <task><description>Step ${i + 1}: answer with the word ok.</description></task>`;
const TEN = `<task type="sequential">\n  <steps>\n${Array.from({ length: 10 }, (_, i) => step(i)).join("\n")}\n  </steps>\n</task>`;

function freePort() {
  return new Promise((ok) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** Starts `file args`, resolving once its output matches `ready`. */
function start(file, argv, env, ready, cwd) {
  const proc = spawn(file, argv, { env: { ...process.env, ...env }, cwd, stdio: ["ignore", "pipe", "pipe"] });
  let tail = "";
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${file} not ready:\n${tail}`)), 30_000);
    const take = (chunk) => {
      tail = (tail + chunk).slice(-8192);
      const m = tail.match(ready);
      if (m) {
        clearTimeout(timer);
        ok({ proc, match: m, tail: () => tail });
      }
    };
    proc.stdout.on("data", take);
    proc.stderr.on("data", take);
    proc.once("exit", (code) => fail(new Error(`${file} exited ${code}:\n${tail}`)));
  });
}

function stop(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((ok) => {
    proc.once("exit", () => ok());
    proc.kill("SIGTERM");
  });
}

const cpuUs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * TICK_US;
};

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const natsDir = mkdtempSync(join(tmpdir(), "dirigent-records-cost-"));
const monitor = await freePort();
const natsPort = await freePort();
const nats = await start(
  "/usr/sbin/nats-server",
  ["-c", join(repo, "nats.conf"), "-a", "127.0.0.1", "-p", String(natsPort), "-m", String(monitor)],
  {},
  /Server is ready/,
  natsDir,
);
const natsUrl = `nats://127.0.0.1:${natsPort}`;
const model = await start(process.execPath, [here("model-server.mjs")], {}, /listening (\d+)/);
const modelUrl = `http://127.0.0.1:${model.match[1]}/v1`;
const monitorJson = async (path) => (await fetch(`http://127.0.0.1:${monitor}${path}`)).json();

/** Stores so far in each stream whose name starts with `upper` (its last sequence). */
async function streamSeqs(upper) {
  const jsz = await monitorJson("/jsz?accounts=true&streams=true");
  const out = {};
  for (const account of jsz.account_details ?? [])
    for (const s of account.stream_detail ?? []) if (s.name.includes(upper)) out[s.name.replace(upper, "")] = s.state.last_seq;
  return out;
}

const nc = await connect({ servers: natsUrl, name: "records-cost-submitter" });
const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * With `--actors` or `--writes`: asks `proc` (./count-actors.cjs, ./count-writes.cjs preloaded) for its counts so far,
 * by probe (`files`: each probe's file, undefined when it is not loaded) and by kind. Each writes its file on SIGUSR2,
 * numbered, so each ask waits for its own answer.
 */
function probeCounter(proc, files) {
  const probes = Object.entries(files).filter(([, file]) => file !== undefined);
  let dumps = 0;
  return async () => {
    if (probes.length === 0) return {};
    // Every probe counts the signals it was sent, so each writes this dump's number with its counts.
    const dump = ++dumps;
    proc.kill("SIGUSR2");
    const counts = {};
    for (const [probe, file] of probes) {
      for (;;) {
        let written;
        try {
          written = JSON.parse(readFileSync(file, "utf8"));
        } catch {
          // not written yet, or half written
        }
        if (written?.dump === dump) {
          counts[probe] = written.counts;
          break;
        }
        await new Promise((ok) => setTimeout(ok, 5));
      }
    }
    return counts;
  };
}

/** `dirigent up` of the build in `dir` on the subject root `root`, under `node` with the variant's flags and environment. */
function startUp(name, dir, round, root, dataDir, files) {
  const node = [
    ...(PROF ? ["--cpu-prof", "--cpu-prof-dir", join(PROF, `${name}-${round}`)] : []),
    ...(ACTORS ? ["--require", here("count-actors.cjs")] : []),
    ...(WRITES ? ["--require", here("count-writes.cjs")] : []),
    ...(process.env[`NODE_ARGS_${name}`]?.split(" ").filter(Boolean) ?? []),
  ];
  return start(
    process.execPath,
    [...node, join(dir, "dist/runtime/cli.js"), "up", "--nats", natsUrl, "--prefix", root, "--concurrency", "64", "--model", "bench-model"],
    {
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: "bench",
      DIRIGENT_DATA_DIR: dataDir,
      ...(ACTORS ? { DIRIGENT_COUNT_ACTORS: files.actors } : {}),
      ...(WRITES ? { DIRIGENT_COUNT_WRITES: files.writes, DIRIGENT_COUNT_WRITES_ROOT: root } : {}),
      // The writes' marks, beside the CPU profile if any, for ./profile-summary.mjs --windows.
      ...(WRITES && MARKS ? { DIRIGENT_WRITE_MARKS: join(MARKS, `${name}-${round}`, "marks.json") } : {}),
      ...variantEnv[name],
    },
    /dirigent: ready/,
  );
}

/**
 * `--tap`: every message of the account, counted by subject made generic (./subject-names.cjs: root `root`, ids); a
 * reply is named after the subject it answers.
 */
function tapMessages(root) {
  /** Counts and bytes (and with `--samples` the largest message) by subject. */
  const tapped = new Map();
  /** The subject each pending reply answers, by its inbox. */
  const replyTo = new Map();
  const sub = nc.subscribe(">", {
    callback: (_, msg) => {
      const asked = replyTo.get(msg.subject);
      if (asked) replyTo.delete(msg.subject);
      const subject = genericSubject(msg.subject, root).concat(asked ? ` (reply to ${asked})` : "");
      if (msg.reply?.startsWith("_INBOX.")) replyTo.set(msg.reply, subject);
      const t = tapped.get(subject) ?? { n: 0, bytes: 0, sample: "" };
      if (args.samples && msg.data.length >= t.sample.length) t.sample = dec.decode(msg.data);
      t.n++;
      if (args.order && subject === "R.tasks.<id>.events") {
        const e = JSON.parse(dec.decode(msg.data));
        console.log(`event ${e.seq} ${e.type} ${e.data?.nodePath ?? ""} ${e.message ?? ""}`);
      }
      t.bytes += msg.data.length;
      tapped.set(subject, t);
    },
  });
  return {
    clear: () => tapped.clear(),
    /** Prints the messages per task of a phase of `count` tasks, most frequent first. */
    print(name, count) {
      for (const [subject, t] of [...tapped].sort((x, y) => y[1].n - x[1].n))
        console.log(
          `${name} tap ${(t.n / count).toFixed(2).padStart(7)} msgs ${(t.bytes / t.n).toFixed(0).padStart(6)} B  ${subject}${t.sample ? `\n    ${t.sample}` : ""}`,
        );
    },
    unsubscribe: () => sub.unsubscribe(),
  };
}

/** `--subs`: the subscriptions of `up`'s connections (and of every connection not the bench's own). */
async function printSubscriptions(name) {
  const connz = await monitorJson("/connz?limit=1000&subs=detail");
  for (const c of connz.connections)
    if (c.name === "dirigent-up" || !c.name?.startsWith("records-cost"))
      console.log(
        name,
        c.cid,
        c.name,
        JSON.stringify((c.subscriptions_list_detail ?? []).map((d) => `${d.subject}${d.qgroup ? ` [${d.qgroup}]` : ""} ${d.msgs}`)),
      );
}

async function runVariant(name, dir, round) {
  const root = `t${randomBytes(6).toString("hex")}`;
  const upper = root.toUpperCase();
  const dataDir = mkdtempSync(join(tmpdir(), "dirigent-records-cost-up-"));
  const files = { actors: ACTORS ? join(dataDir, "actors.json") : undefined, writes: WRITES ? join(dataDir, "writes.json") : undefined };
  const up = await startUp(name, dir, round, root, dataDir, files);
  const waiting = new Map();
  const sub = nc.subscribe(`${root}.tasks.*.result`, {
    callback: (_, msg) => {
      const outcome = JSON.parse(dec.decode(msg.data));
      if (outcome.status !== "COMPLETE") console.error(`${name}: ${outcome.status} ${outcome.error?.message ?? ""}`);
      waiting.get(outcome.taskId)?.();
    },
  });
  const tap = args.tap ? tapMessages(root) : undefined;
  await nc.flush();
  const one = async (xml) => {
    const taskId = `b-${randomUUID()}`;
    const done = new Promise((ok) => waiting.set(taskId, ok));
    const t0 = performance.now();
    const reply = JSON.parse(
      dec.decode(
        (await nc.request(`${root}.tasks.submit`, enc.encode(JSON.stringify({ taskId, xml, inputs: {} })), { timeout: 60_000 })).data,
      ),
    );
    if (reply.status !== "accepted") throw new Error(`not accepted: ${JSON.stringify(reply)}`);
    await done;
    waiting.delete(taskId);
    return performance.now() - t0;
  };
  const conns = async () => {
    const connz = await monitorJson("/connz?limit=1000&subs=true");
    return Object.fromEntries(connz.connections.map((c) => [`${c.cid}:${c.name ?? ""}`, c]));
  };
  const probeCounts = probeCounter(up.proc, files);
  const phase = async (xml, count, atOnce = false) => {
    tap?.clear();
    const probesBefore = await probeCounts();
    const before = {
      up: cpuUs(up.proc.pid),
      nats: cpuUs(nats.proc.pid),
      varz: await monitorJson("/varz"),
      seqs: await streamSeqs(upper),
      conns: await conns(),
    };
    const ms = [];
    const t0 = performance.now();
    if (atOnce) ms.push(...(await Promise.all(Array.from({ length: count }, () => one(xml)))));
    else for (let i = 0; i < count; i++) ms.push(await one(xml));
    const perSecond = count / ((performance.now() - t0) / 1000);
    const varz = await monitorJson("/varz");
    const seqs = await streamSeqs(upper);
    const probesAfter = await probeCounts();
    const after = await conns();
    const byConn = {};
    for (const [k, c] of Object.entries(after)) {
      const b = before.conns[k];
      if (!b) continue;
      const d = { in: (c.in_msgs - b.in_msgs) / count, out: (c.out_msgs - b.out_msgs) / count };
      if (d.in || d.out) byConn[k] = d;
    }
    if (args.conns) console.log(JSON.stringify(byConn));
    tap?.print(name, count);
    ms.sort((a, b) => a - b);
    const per = (x) => x / count;
    return {
      p50: ms[Math.floor(count / 2)],
      perSecond,
      upCpuUs: per(cpuUs(up.proc.pid) - before.up),
      natsCpuUs: per(cpuUs(nats.proc.pid) - before.nats),
      inMsgs: per(varz.in_msgs - before.varz.in_msgs),
      inBytes: per(varz.in_bytes - before.varz.in_bytes),
      outMsgs: per(varz.out_msgs - before.varz.out_msgs),
      stores: Object.fromEntries(Object.entries(seqs).map(([s, v]) => [s, per(v - (before.seqs[s] ?? 0))])),
      ...Object.fromEntries(
        Object.entries(probesAfter).map(([probe, after]) => [
          probe,
          Object.fromEntries(Object.entries(after).map(([k, v]) => [k, per(v - (probesBefore[probe]?.[k] ?? 0))])),
        ]),
      ),
    };
  };
  if (args.subs) await printSubscriptions(name);
  try {
    for (let i = 0; i < WARMUP; i++) await one(ONE);
    for (let i = 0; i < Math.ceil(WARMUP / 5); i++) await one(TEN);
    return {
      ...(THROUGHPUT > 0 ? { many: await phase(ONE, THROUGHPUT, true) } : {}),
      one: await phase(ONE, TASKS),
      ten: await phase(TEN, SEQ),
    };
  } finally {
    sub.unsubscribe();
    tap?.unsubscribe();
    await stop(up.proc);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const results = Object.fromEntries(names.map((n) => [n, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const r = await runVariant(name, variants[name], round);
      results[name].push(r);
      console.log(`round ${round + 1} ${name}: ${JSON.stringify(r)}`);
    }
  }
} finally {
  await nc.close();
  await stop(model.proc);
  await stop(nats.proc);
  rmSync(natsDir, { recursive: true, force: true });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2));
console.log(
  `\nmedians over ${ROUNDS} rounds (${names.map((n) => `${n}: ${variants[n]}`).join(", ")}); per task, one at a time; ratios to ${names[0]}`,
);
console.log(`${"".padEnd(34)}${names.map((n) => n.padStart(18)).join("")}`);
for (const kind of [...(THROUGHPUT > 0 ? ["many"] : []), ...(TASKS > 0 ? ["one"] : []), ...(SEQ > 0 ? ["ten"] : [])]) {
  const row = (label, of) => {
    const values = names.map((n) => median(results[n].map(of)));
    console.log(
      `${`${kind} ${label}`.padEnd(34)}${values.map((v, i) => `${fmt(v)}${i ? ` (${(v / values[0]).toFixed(2)})` : ""}`.padStart(18)).join("")}`,
    );
  };
  for (const field of [kind === "many" ? "perSecond" : "p50", "upCpuUs", "natsCpuUs", "inMsgs", "inBytes", "outMsgs"])
    row(field, (r) => r[kind][field]);
  const streams = new Set(names.flatMap((n) => results[n].flatMap((r) => Object.keys(r[kind].stores))));
  for (const s of streams) row(`stores ${s}`, (r) => r[kind].stores[s] ?? 0);
  // With --actors: the kinds any variant started during this workload.
  const kinds = new Set(
    names.flatMap((n) => results[n].flatMap((r) => Object.entries(r[kind].actors ?? {}).flatMap(([k, v]) => (v > 0 ? [k] : [])))),
  );
  for (const k of kinds) row(`actors ${k}`, (r) => r[kind].actors?.[k] ?? 0);
  // With --writes: the socket writes per task in all, then by what they carried (those of 0.05 or more per task).
  if (WRITES) {
    const total = (r) => Object.values(r[kind].writes ?? {}).reduce((a, b) => a + b, 0);
    row("writes", total);
    const carried = new Set(
      names.flatMap((n) => results[n].flatMap((r) => Object.entries(r[kind].writes ?? {}).flatMap(([k, v]) => (v >= 0.05 ? [k] : [])))),
    );
    for (const k of carried) row(`writes ${k}`, (r) => r[kind].writes?.[k] ?? 0);
  }
}
