/**
 * Memory with the model: `dirigent memory index --summarize` (descriptions written by the model) and
 * `--llm-match` (the model chooses among MiniSearch's candidates), against a real nats-server and the scripted
 * `dirigent mock-llm` reached through the openai SDK.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createModelClient } from "../../runtime/model/openai.js";
import { ask } from "../../actors/ask.js";
import { createSubjects, Requests, type MatchRequest } from "../../protocol/index.js";
import { registerMemoryCommands } from "../../runtime/cli/memory.js";
import { loadConfig } from "../../runtime/config.js";
import { SUMMARIZED } from "../../runtime/indexer/indexer.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startSystem } from "../../runtime/system.js";
import { openNatsTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

let server: TestNatsServer;
let mock: MockLlmServer;

const PARSE = "/repo/src/template/parse.ts";
const BUS = "/repo/src/nats-bus.ts";
const DOC = "/repo/docs/memory.md";
const choice = JSON.stringify([
  { path: DOC, relevance: "explains the index", score: 0.9 },
  { path: "/repo/invented.ts", relevance: "not a candidate", score: 1 },
  { path: BUS, relevance: "the bus itself", score: 0.6 },
  { path: DOC, relevance: "twice", score: 0.1 },
]);

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    script: {
      rules: [
        // --summarize: one description per file, one file the model cannot describe.
        {
          match: { system: "You describe files", lastUser: "File: src/parse.ts" },
          reply: "Description: Turns XML task templates into syntax trees.",
        },
        { match: { system: "You describe files", lastUser: "File: src/broken.ts" }, status: 400, error: "this file upsets the model" },
        { match: { system: "You describe files", lastUser: "File: notes.md" }, reply: "```\n\n```" },
        { match: { system: "You describe files" }, reply: "A helper module of the quasar flux capacitor." },
        // --llm-match: a usable choice, an unusable answer, a failing model.
        { match: { system: "You select the files", lastUser: "CHOOSE" }, reply: `Here you are:\n\`\`\`json\n${choice}\n\`\`\`` },
        { match: { system: "You select the files", lastUser: "GARBAGE" }, reply: "The parser, surely." },
        { match: { system: "You select the files", lastUser: "FAIL" }, status: 400, error: "no capacity" },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const request = (description: string): MatchRequest => ({
  type: "memory.match",
  templateDescription: description,
  templateType: "atomic",
  inputs: {},
});

describe("dirigent memory index --summarize", () => {
  it("stores the model's descriptions, keeps the extracted one when the model fails, and re-describes only what needs it", async () => {
    const root = randomRoot();
    const dir = await mkdtemp(join(tmpdir(), "dirigent-summarize-"));
    const saved = { ...process.env };
    process.env.OPENAI_BASE_URL = mock.url;
    process.env.DIRIGENT_MODEL_MAX_RETRIES = "0";
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
    const transport = await openNatsTransport(server.url, createSubjects(root), { name: "test", log: silentLogger });
    try {
      await mkdir(join(dir, "src"));
      await writeFile(join(dir, "src/parse.ts"), "/** Parses templates. */\nexport function parseTemplate() {}\n");
      await writeFile(join(dir, "src/broken.ts"), "/** Extracted here. */\nexport const broken = 1;\n");
      await writeFile(join(dir, "src/flux.ts"), "export const flux = 1;\n");
      await writeFile(join(dir, "notes.md"), "# Notes on the bus\n");
      await run("index", dir, "--summarize", "--summarize-concurrency", "2");
      expect(out.at(-1)).toMatch(/^indexed 4 files \(read 4, unchanged 0, skipped 0\)/);
      const byPath = async () => new Map((await transport.index.getGlobalIndex()).entries.map((e) => [e.path, e]));
      let entries = await byPath();
      expect(entries.get(join(dir, "src/parse.ts"))?.metadata).toMatch(
        /^language: TypeScript; size: \d+ B; name: parse\.ts; Turns XML task templates into syntax trees\.$/,
      );
      expect(entries.get(join(dir, "src/parse.ts"))?.stamp).toMatch(new RegExp(`${SUMMARIZED}$`));
      expect(entries.get(join(dir, "src/flux.ts"))?.metadata).toContain("A helper module of the quasar flux capacitor.");
      expect(entries.get(join(dir, "src/broken.ts"))?.metadata).toMatch(
        /^language: TypeScript; size: \d+ B; name: broken\.ts; Extracted here\.; exports: broken$/,
      );
      expect(entries.get(join(dir, "notes.md"))?.metadata).toMatch(/^language: Markdown; size: \d+ B; name: notes\.md; Notes on the bus$/);
      const warnings = notes.filter((n) => n.startsWith("warning:")).sort();
      expect(warnings).toHaveLength(2);
      expect(warnings[0]).toMatch(/^warning: .*notes\.md: the model wrote no description \(the model answered no description\)/);
      expect(warnings[1]).toMatch(/^warning: .*src\/broken\.ts: the model wrote no description \(.*this file upsets the model\)/);
      expect(notes).toContain("the model described 2 files; 2 kept the extracted description\n");
      expect(notes.some((n) => /^summarized 4\/4 files/.test(n))).toBe(true);
      // Each summary request carries the file's head, named relative to the directory.
      const asked = mock.requests.filter((r) => JSON.stringify(r.body.messages).includes("You describe files"));
      expect(asked).toHaveLength(4);
      expect(JSON.stringify(asked.map((r) => r.body.messages))).toContain("export function parseTemplate()");

      // Again with --summarize: only the files the model did not describe are read (and asked about) again.
      await run("index", dir, "--summarize");
      expect(out.at(-1)).toMatch(/^indexed 4 files \(read 2, unchanged 2, skipped 0\)/);
      expect(mock.requests.filter((r) => JSON.stringify(r.body.messages).includes("You describe files"))).toHaveLength(6);
      // Without --summarize, the summaries of unchanged files are kept and nothing is read.
      await run("index", dir);
      expect(out.at(-1)).toMatch(/^nothing changed in 4 files \(read 0, unchanged 4, skipped 0\)/);
      // A changed file is described again.
      await writeFile(join(dir, "src/parse.ts"), "/** Parses templates, now faster. */\nexport function parseTemplate() {}\n");
      await run("index", dir, "--summarize");
      expect(out.at(-1)).toMatch(/^indexed 4 files \(read 3, unchanged 1, skipped 0\)/);
      entries = await byPath();
      expect(entries.get(join(dir, "src/parse.ts"))?.metadata).toContain("Turns XML task templates into syntax trees.");

      // dirigent memory match --llm-match: the model's answer is unusable here, so MiniSearch's ranking is printed with a note.
      await run("match", "quasar flux", "--llm-match", "--limit", "2");
      expect(out.at(-2)).toMatch(/^1 relevant file of 4 indexed, ranked by MiniSearch \(the model's answer was unusable/);
      expect(out.at(-1)).toContain(join(dir, "src/flux.ts"));
    } finally {
      process.env = saved;
      await transport.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("dirigent memory index --summarize without a model", () => {
  it("says that the offline mock writes no descriptions and keeps the extracted ones", async () => {
    const root = randomRoot();
    const dir = await mkdtemp(join(tmpdir(), "dirigent-summarize-offline-"));
    const saved = { ...process.env };
    delete process.env.OPENAI_BASE_URL;
    delete process.env.OPENAI_API_KEY;
    const notes: string[] = [];
    const transport = await openNatsTransport(server.url, createSubjects(root), { name: "test", log: silentLogger });
    try {
      await writeFile(join(dir, "a.ts"), "/** Extracted. */\nexport const a = 1;\n");
      const program = new Command().exitOverride();
      registerMemoryCommands(
        program,
        () => undefined,
        (text) => notes.push(text),
      );
      await program.parseAsync(["node", "dirigent", "memory", "index", dir, "--summarize", "--nats", server.url, "--prefix", root]);
      expect(notes.join("")).toMatch(
        /no OPENAI_API_KEY or OPENAI_BASE_URL set: the offline mock model writes no descriptions, so the extracted ones are kept/,
      );
      const [entry] = (await transport.index.getGlobalIndex()).entries;
      expect(entry?.metadata).toMatch(/; Extracted\.; exports: a$/);
      expect(entry?.stamp).not.toMatch(new RegExp(`${SUMMARIZED}$`));
    } finally {
      process.env = saved;
      await transport.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("Memory role with --llm-match", () => {
  it("lets the model choose among the candidates, keeps only candidate paths, and falls back to MiniSearch with a note", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    const transport = await openNatsTransport(server.url, subjects, { name: "memory", log: silentLogger });
    const config = loadConfig({ prefix: root, llmMatch: "true", concurrency: 4 }, {});
    const callModel = createModelClient({ baseURL: mock.url, apiKey: "test", timeoutMs: 5000, maxRetries: 0 });
    const generation = await transport.index.updateGlobalIndex([
      { path: PARSE, metadata: "language: TypeScript; Parses XML task templates; exports: parseTemplate" },
      { path: BUS, metadata: "language: TypeScript; The bus over NATS; exports: NatsBus" },
      { path: DOC, metadata: "language: Markdown; Memory and the global index over the NATS bus" },
    ]);
    // Started as `dirigent up --llm-match` starts it: through startSystem, with the configured model client.
    const system = await startSystem({ config, transport, roles: ["memory"], callModel, log: silentLogger });
    const deps = { bus: transport.bus, subjects, log: silentLogger, now: () => new Date(), newId: () => "id" };
    const match = (description: string) => ask(deps, Requests.memoryMatch, request(description), { timeoutMs: 10_000 });
    try {
      expect(generation).not.toBe("");
      const reply = await match("CHOOSE the nats bus");
      expect(reply.matches).toEqual([
        { path: DOC, relevance: "explains the index", score: 0.9 },
        { path: BUS, relevance: "the bus itself", score: 0.6 },
      ]);
      expect(reply.context).toBe("2 relevant files of 3 indexed, chosen by the model among 2 candidates");
      const prompt =
        mock.requests
          .at(-1)
          ?.body.messages.map((m) => String(m.content))
          .join("\n") ?? "";
      expect(prompt).toContain(`- ${BUS} :: language: TypeScript; The bus over NATS`);
      expect(prompt).not.toContain(PARSE);

      const ranked = await match("GARBAGE nats bus");
      expect(ranked.context).toMatch(
        /^2 relevant files of 3 indexed, ranked by MiniSearch \(the model's answer was unusable: the answer holds no JSON array\)$/,
      );
      expect(ranked.matches.map((m) => m.path)).toEqual([BUS, DOC]);

      const failed = await match("FAIL nats bus");
      expect(failed.context).toMatch(/ranked by MiniSearch \(the model failed: .*400/);
      expect(failed.matches.map((m) => m.path)).toEqual([BUS, DOC]);

      // Nothing matches: the model is not asked.
      const before = mock.requests.length;
      expect(await match("CHOOSE zebra")).toEqual({ type: "memory.matched", context: "no relevant files found", matches: [] });
      expect(mock.requests.length).toBe(before);
    } finally {
      await system.stop();
      await transport.close();
    }
  });
});
