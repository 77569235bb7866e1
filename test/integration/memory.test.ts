/** The global index in a JetStream KV bucket, shared by processes, and the Memory role serving it over NATS. */
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { startMemory } from "../../actors/memory/memory.js";
import type { IndexStore } from "../../actors/memory/index-store.js";
import { KEEPALIVE_HEADER } from "../../actors/bus.js";
import { ask, RESPONDER_IDLE_TIMEOUT_MS } from "../../actors/ask.js";
import { createSubjects, Requests, type MatchRequest } from "../../protocol/index.js";
import { registerMemoryCommands } from "../../runtime/cli/memory.js";
import { CURRENT_KEY } from "../../runtime/nats/index-store.js";
import { updateIndex } from "../../runtime/indexer/indexer.js";
import { startMockLlm } from "../../runtime/model/mock-server.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

/** Two transports on one server under one root: the view of two processes. */
async function twoProcesses(root = randomRoot()): Promise<[OpenTransport, OpenTransport] & AsyncDisposable> {
  const subjects = createSubjects(root);
  const a = await openNatsTransport(server.url, subjects, { name: "a", log: silentLogger });
  const b = await openNatsTransport(server.url, subjects, { name: "b", log: silentLogger });
  return Object.assign([a, b] as [OpenTransport, OpenTransport], {
    [Symbol.asyncDispose]: async () => void (await Promise.all([a.close(), b.close()])),
  });
}

const entry = (n: number, tag: string) => ({
  path: `/repo/src/file-${n}.ts`,
  metadata: `language: TypeScript; ${tag}; ${"filler words ".repeat(15)}`,
});

const request = (description: string): MatchRequest => ({
  type: "memory.match",
  templateDescription: description,
  templateType: "atomic",
  inputs: {},
});

describe("index store over JetStream KV", () => {
  it("is one index for every process: what one writes the other reads, generation and all", async () => {
    await using pair = await twoProcesses();
    const [a, b] = pair;
    expect(await b.index.getGlobalIndex()).toEqual({ generation: "", entries: [] });
    const generation = await a.index.updateGlobalIndex([
      { path: "/repo/a.ts", metadata: "language: TypeScript; exports: a", stamp: "10:1" },
    ]);
    expect(await b.index.getGlobalIndex()).toEqual({
      generation,
      entries: [{ path: "/repo/a.ts", metadata: "language: TypeScript; exports: a", stamp: "10:1" }],
    });
  });

  it("writes large generations in chunks and purges the replaced generation after the flip", async () => {
    const root = randomRoot();
    await using pair = await twoProcesses(root);
    const [a, b] = pair;
    const first = Array.from({ length: 5000 }, (_, n) => entry(n, "first"));
    const g1 = await a.index.updateGlobalIndex(first);
    const g2 = await a.index.updateGlobalIndex(
      first.slice(0, 3000).map((e) => ({ ...e, metadata: e.metadata.replace("first", "second") })),
    );
    const read = await b.index.getGlobalIndex();
    expect(read.generation).toBe(g2);
    expect(read.entries).toHaveLength(3000);
    const nc = await connect({ servers: server.url });
    try {
      const kv = await new Kvm(nc).open(createSubjects(root).indexBucket);
      const keys: string[] = [];
      for await (const key of await kv.keys()) keys.push(key);
      expect(keys.filter((k) => k.startsWith(`gen.${g1}.`))).toEqual([]);
      expect(keys.filter((k) => k.startsWith(`gen.${g2}.`)).length).toBeGreaterThan(1);
      expect(keys).toContain(CURRENT_KEY);
      const status = await kv.status();
      expect(status.values).toBe(keys.length);
    } finally {
      await nc.close();
    }
  });

  it("lets concurrent writers race without leaving orphaned generations", async () => {
    const root = randomRoot();
    await using pair = await twoProcesses(root);
    const [a, b] = pair;
    const write = (store: OpenTransport, tag: string) =>
      store.index.updateGlobalIndex(Array.from({ length: 2000 }, (_, n) => entry(n, tag)));
    const written = await Promise.all([write(a, "a1"), write(b, "b1"), write(a, "a2"), write(b, "b2")]);
    const current = await a.index.getGlobalIndex();
    expect(written).toContain(current.generation);
    const nc = await connect({ servers: server.url });
    try {
      const kv = await new Kvm(nc).open(createSubjects(root).indexBucket);
      const keys: string[] = [];
      for await (const key of await kv.keys()) keys.push(key);
      expect(keys.filter((k) => k !== CURRENT_KEY && !k.startsWith(`gen.${current.generation}.`))).toEqual([]);
      expect((await kv.status()).values).toBe(keys.length);
    } finally {
      await nc.close();
    }
  });

  it("keeps both runs' entries when two processes index different directories at once", async () => {
    const root = randomRoot();
    await using pair = await twoProcesses(root);
    const [a, b] = pair;
    const dir = await mkdtemp(join(tmpdir(), "dirigent-index-race-"));
    try {
      await mkdir(join(dir, "one"));
      await mkdir(join(dir, "two"));
      await writeFile(join(dir, "one/alpha.ts"), "export const alpha = 1;\n");
      await writeFile(join(dir, "two/beta.ts"), "export const beta = 2;\n");
      // Each run reads the index, then waits until the other has read it too: both merge into the same generation,
      // and the one that writes second must notice and merge again.
      let read = 0;
      let release = () => undefined as void;
      const bothRead = new Promise<void>((resolve) => (release = resolve));
      const afterBothRead = (store: IndexStore): IndexStore => {
        let first = true;
        return {
          durable: store.durable,
          getGlobalIndex: async () => {
            const snapshot = await store.getGlobalIndex();
            if (first) {
              first = false;
              if (++read === 2) release();
              await bothRead;
            }
            return snapshot;
          },
          updateGlobalIndex: (entries, options) => store.updateGlobalIndex(entries, options),
          watch: (onGeneration) => store.watch(onGeneration),
        };
      };
      await Promise.all([updateIndex(afterBothRead(a.index), join(dir, "one")), updateIndex(afterBothRead(b.index), join(dir, "two"))]);
      const current = await b.index.getGlobalIndex();
      expect(current.entries.map((e) => e.path).sort()).toEqual([join(dir, "one/alpha.ts"), join(dir, "two/beta.ts")]);
      // The write that lost its base left no chunks behind.
      const nc = await connect({ servers: server.url });
      try {
        const kv = await new Kvm(nc).open(createSubjects(root).indexBucket);
        const keys: string[] = [];
        for await (const key of await kv.keys()) keys.push(key);
        expect(keys.filter((k) => k !== CURRENT_KEY && !k.startsWith(`gen.${current.generation}.`))).toEqual([]);
      } finally {
        await nc.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("never lets a reader see a generation half-written or mixed with another", async () => {
    await using pair = await twoProcesses();
    const [writer, reader] = pair;
    const sizes = [4000, 1500, 3000, 2500, 3500];
    let writing = true;
    const writes = (async () => {
      for (const [i, size] of sizes.entries())
        await writer.index.updateGlobalIndex(Array.from({ length: size }, (_, n) => entry(n, `gen-${i}`)));
      writing = false;
    })();
    const seen: { tags: string[]; count: number }[] = [];
    while (writing || seen.length === 0) {
      const snapshot = await reader.index.getGlobalIndex();
      seen.push({ tags: [...new Set(snapshot.entries.map((e) => /gen-\d/.exec(e.metadata)?.[0] ?? "?"))], count: snapshot.entries.length });
    }
    await writes;
    // The reader really overlapped the writer: it saw several generations.
    expect(new Set(seen.flatMap((v) => v.tags)).size).toBeGreaterThan(1);
    for (const view of seen.filter((v) => v.count > 0)) {
      expect(view.tags).toHaveLength(1);
      expect(view.count).toBe(sizes[Number(view.tags[0]?.slice(4))]);
    }
  });
});

describe("Memory role over NATS", () => {
  it("answers memory.match from the shared index and picks up a generation another process writes", async () => {
    const root = randomRoot();
    await using pair = await twoProcesses(root);
    const [a, b] = pair;
    const deps: ActorDeps = {
      bus: a.bus,
      subjects: createSubjects(root),
      log: silentLogger,
      now: () => new Date(),
      newId: () => randomUUID(),
    };
    const g1 = await b.index.updateGlobalIndex([
      { path: "/repo/src/template/parse.ts", metadata: "language: TypeScript; Parses XML task templates; exports: parseTemplate" },
      { path: "/repo/src/nats-bus.ts", metadata: "language: TypeScript; The bus over NATS; exports: NatsBus" },
      { path: "/repo/docs/memory.md", metadata: "language: Markdown; Memory and the global index" },
    ]);
    const memory = startMemory(deps, { concurrency: 4, store: a.index });
    try {
      await memory.serving(g1);
      const reply = await ask(deps, Requests.memoryMatch, request("fix the XML template parser"), { timeoutMs: 5000 });
      expect(reply.matches[0]?.path).toBe("/repo/src/template/parse.ts");
      expect(reply.context).toBe("1 relevant file of 3 indexed");

      const g2 = await b.index.updateGlobalIndex([
        { path: "/repo/src/ranker.ts", metadata: "language: TypeScript; Ranks files with MiniSearch; exports: IndexRanker" },
      ]);
      await memory.serving(g2);
      const after = await ask(deps, Requests.memoryMatch, request("rank files with minisearch"), { timeoutMs: 5000 });
      expect(after.matches.map((m) => m.path)).toEqual(["/repo/src/ranker.ts"]);
      expect(after.matches[0]?.score).toBeGreaterThan(0.5);
    } finally {
      await memory.stop();
    }
  });
});

describe("a Memory process dying mid-request", () => {
  it("is replaced: the Evaluator asks again after the idle timeout and another Memory process answers", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    await using mock = Object.assign(await startMockLlm({ port: 0, script: { rules: [], default: { reply: "done without memory" } } }), {
      [Symbol.asyncDispose]: () => mock.close(),
    });
    await using workers = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "handler"] });
    // The first Memory process takes the request, signals that it works on it, and dies without answering.
    const dying = new NatsBus(await connectNats({ servers: server.url, name: "memory-dying" }), { onError: () => undefined });
    let keepalive: ReturnType<typeof setInterval> | undefined;
    const taken = new Promise<void>((resolve) =>
      dying.subscribe(
        subjects.memoryMatch,
        (msg) => {
          const every = Number(msg.headers?.get(KEEPALIVE_HEADER));
          keepalive = setInterval(() => msg.respond(new Uint8Array(0)), every);
          resolve();
        },
        { queue: subjects.queue("memory") },
      ),
    );
    await dying.flush();
    const started = Date.now();
    const running = workers.client.run({
      taskId: newTaskId(),
      xml: `<task><description>Summarise the survey.</description>
  <context_management><inherit_context>none</inherit_context><fresh_context>enabled</fresh_context></context_management></task>`,
    });
    await taken;
    await using survivor = await startStack({ url: server.url, mock, root, roles: ["memory"] });
    clearInterval(keepalive);
    await dying.close();
    const outcome = await running;
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "done without memory", notes: { context_source: "fresh_context" } });
    // Well before the 30 s a plain request would have waited.
    expect(Date.now() - started).toBeLessThan(RESPONDER_IDLE_TIMEOUT_MS + 8000);
    void survivor;
  });
});

describe("dirigent memory index / match", () => {
  it("indexes a directory into NATS and prints the matches, best first", async () => {
    const root = randomRoot();
    const dir = await mkdtemp(join(tmpdir(), "dirigent-cli-index-"));
    try {
      await mkdir(join(dir, "src"));
      await writeFile(join(dir, "src/parse.ts"), "/** Parses XML task templates. */\nexport function parseTemplate() {}\n");
      await writeFile(join(dir, "src/bus.ts"), "/** The NATS bus. */\nexport class NatsBus {}\n");
      await writeFile(join(dir, ".gitignore"), "ignored.ts\n");
      await writeFile(join(dir, "ignored.ts"), "export const parseTemplateCopy = 1;\n");
      const out: string[] = [];
      const notes: string[] = [];
      const run = async (...args: string[]) => {
        const program = new Command().exitOverride();
        registerMemoryCommands(
          program,
          (text) => out.push(text),
          (text) => notes.push(text),
        );
        await program.parseAsync(["node", "dirigent", "memory", ...args, "--nats", server.url, "--prefix", root]);
      };
      await run("index", dir);
      expect(out.at(-1)).toMatch(/^indexed 3 files \(read 3, unchanged 0, skipped 1\) as generation \S+ on /);
      await run("index", dir);
      expect(out.at(-1)).toMatch(/^nothing changed in 3 files \(read 0, unchanged 3, skipped 1\): generation \S+ stays/);
      const previous = process.env["DIRIGENT_WORKSPACE_ROOT"];
      try {
        process.env["DIRIGENT_WORKSPACE_ROOT"] = dir;
        await run("match", "xml template parser", "--limit", "1");
        expect(out.at(-1)).toContain(join(dir, "src/parse.ts"));
        expect(notes).toEqual([]);
        // Matches a task run with another workspace root could not attach are flagged on stderr.
        process.env["DIRIGENT_WORKSPACE_ROOT"] = join(dir, "src", "nested");
        await run("match", "xml template parser", "--limit", "1");
        expect(out.at(-1)).toContain(join(dir, "src/parse.ts"));
        expect(notes).toEqual([
          `warning: 1 of 1 matches lie outside the workspace root '${join(dir, "src", "nested")}' (DIRIGENT_WORKSPACE_ROOT), such as ${join(dir, "src/parse.ts")}: a task cannot attach them (they land in context_file_errors)\n`,
        ]);
      } finally {
        if (previous === undefined) delete process.env["DIRIGENT_WORKSPACE_ROOT"];
        else process.env["DIRIGENT_WORKSPACE_ROOT"] = previous;
      }
      await expect(run("index", join(dir, "missing"))).rejects.toThrow(`cannot index '${join(dir, "missing")}': no such directory`);
      await expect(run("index", dir, "--include", "{a,b")).rejects.toThrow("glob '{a,b'");
      await expect(run("index", dir, "--max-file-size", "lots")).rejects.toThrow("--max-file-size 'lots'");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("finds a file by the words of its first paragraph, not only its heading (issue 20)", async () => {
    const root = randomRoot();
    const dir = await mkdtemp(join(tmpdir(), "dirigent-cli-meaning-"));
    try {
      await mkdir(join(dir, "docs"));
      await mkdir(join(dir, "src"));
      await writeFile(
        join(dir, "docs/billing.md"),
        "# Billing\n\nInvoice rounding rules and VAT computation.\n\n## Credit notes\n\nHow refunds are issued.\n",
      );
      await writeFile(join(dir, "docs/setup.md"), "# Setup\n\nInstall the service and start it.\n");
      await writeFile(join(dir, "src/retry-backoff.ts"), "export function delayFor(attempt: number) {\n  return 2 ** attempt;\n}\n");
      const out: string[] = [];
      const run = async (...args: string[]) => {
        const program = new Command().exitOverride();
        registerMemoryCommands(
          program,
          (text) => out.push(text),
          () => undefined,
        );
        await program.parseAsync(["node", "dirigent", "memory", ...args, "--nats", server.url, "--prefix", root]);
      };
      await run("index", dir);
      await run("match", "invoice VAT rounding", "--json");
      const { matches } = JSON.parse(out.at(-1) ?? "{}") as { matches: { path: string }[] };
      expect(matches[0]?.path).toBe(join(dir, "docs/billing.md"));
      // Path words count, stemmed: "retries" and "backing off" find retry-backoff.ts.
      await run("match", "where are retries delayed with backoff", "--json");
      expect((JSON.parse(out.at(-1) ?? "{}") as { matches: { path: string }[] }).matches[0]?.path).toBe(join(dir, "src/retry-backoff.ts"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("finds a file by a name deep inside it, through the identifiers stored in KV", async () => {
    const root = randomRoot();
    const dir = await mkdtemp(join(tmpdir(), "dirigent-cli-identifiers-"));
    try {
      const lead = `/** Helpers of the stream layer. ${"They are many and this comment is long. ".repeat(8)}*/\n`;
      const helpers = Array.from({ length: 20 }, (_, i) => `export function helperNumber${"abcdefghijklmnopqrst"[i]}() {}`).join("\n");
      await writeFile(join(dir, "tools.ts"), `${lead}${helpers}\nfunction build() {\n  function filterBrokenPipe(err: Error) {}\n}\n`);
      await writeFile(join(dir, "other.ts"), "/** Pipes data between streams. */\nexport function connect() {}\n");
      const out: string[] = [];
      const run = async (...args: string[]) => {
        const program = new Command().exitOverride();
        registerMemoryCommands(
          program,
          (text) => out.push(text),
          () => undefined,
        );
        await program.parseAsync(["node", "dirigent", "memory", ...args, "--nats", server.url, "--prefix", root]);
      };
      await run("index", dir);
      await run("match", "where is a broken pipe error filtered", "--json");
      expect((JSON.parse(out.at(-1) ?? "{}") as { matches: { path: string }[] }).matches[0]?.path).toBe(join(dir, "tools.ts"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
