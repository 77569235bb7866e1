import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkEntries } from "../../../actors/memory/index-store.js";
import { IDENTIFIERS_WEIGHT, IndexRanker } from "../../../actors/memory/rank.js";
import { IndexEntry, MAX_IDENTIFIERS_CHARS } from "../../../protocol/index.js";
import { identifiersOf, MAX_IDENTIFIERS } from "../../../runtime/indexer/identifiers.js";
import { indexDirectory } from "../../../runtime/indexer/indexer.js";

const TS = `/** Retry policy. This function must not throw. */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { readFile } from "node:fs/promises";

export interface RetryOptions {
  maxAttempts: number;
  readonly baseDelayMs?: number;
}

export class Backoff {
  #attempt = 0;
  async nextDelay(options: RetryOptions): Promise<number> {
    if (this.#attempt > 3) {
      return 0;
    }
    return computeJitter(options);
  }
}

export function computeJitter(options: RetryOptions): number {
  const spread = options.baseDelayMs ?? 10;
  bus.emit("retry-exhausted", spread);
  return spread;
}
`;

const JS = `'use strict'
const { mapHttpRequest, mapHttpResponse } = require('pino-std-serializers')
// Register the function that flushes the stream when the process exits.
function setupOnExit (stream) {
  onExit.register(stream, autoEnd)
  stream.on('beforeExit', flush)
}
pino.destination = function (dest) { return buildSafeSonicBoom({ dest }) }
const defaults = {
  depthLimit: 5,
  edgeLimit: 100
}
module.exports = { setupOnExit }
`;

const MD = `# Transports

Transports move logs elsewhere.

\`\`\`js
# not a heading, inside a fence
const insideFence = true
\`\`\`

${Array.from({ length: 15 }, (_, i) => `## Section number${"abcdefghijklmnopq"[i]}\n\nUse \`option${"ABCDEFGHIJKLMNOPQ"[i]}\` here.\n`).join("\n")}
### Asynchronous startup
`;

describe("identifiers of a file", () => {
  it("takes a TypeScript file's classes, methods, functions, members, variables, imports and name-like literals", () => {
    const found = identifiersOf("/r/src/retry.ts", TS).split(" ");
    for (const name of [
      "Backoff",
      "nextDelay",
      "computeJitter",
      "maxAttempts",
      "baseDelayMs",
      "spread",
      "connect",
      "NatsConnection",
      "readFile",
    ])
      expect(found).toContain(name);
    expect(found).toContain("retry");
    expect(found).toContain("exhausted");
    // Statement keywords, comment prose and module paths are not names.
    for (const word of ["if", "must", "return", "nats", "io"]) expect(found).not.toContain(word);
  });

  it("takes a CommonJS file's functions, assigned properties, object keys and destructured requires", () => {
    const found = identifiersOf("/r/lib/tools.js", JS).split(" ");
    for (const name of ["setupOnExit", "destination", "depthLimit", "edgeLimit", "mapHttpRequest", "mapHttpResponse", "beforeExit"])
      expect(found).toContain(name);
    expect(found).not.toContain("Register");
  });

  it("leaves out the words the description already holds", () => {
    const found = identifiersOf("/r/lib/tools.js", JS, "Flushes on exit; exports: setupOnExit").split(" ");
    expect(found).not.toContain("setupOnExit");
    expect(found).toContain("edgeLimit");
  });

  it("takes every Markdown heading (not only the first 12) and inline code, outside code fences", () => {
    const found = identifiersOf("/r/docs/transports.md", MD).split(" ");
    expect(found).toContain("Transports");
    expect(found).toContain("numbero");
    expect(found).toContain("Asynchronous");
    expect(found).toContain("startup");
    expect(found).toContain("optionA");
    expect(found).not.toContain("insideFence");
    // Headings come before inline code.
    expect(found.indexOf("startup")).toBeLessThan(found.indexOf("optionA"));
  });

  it("takes JSON keys, Python definitions, and nothing from a file of unknown language", () => {
    expect(identifiersOf("/r/package.json", '{"name": "x", "scripts": {"prepublishOnly": "tsc"}}').split(" ")).toEqual(
      expect.arrayContaining(["scripts", "prepublishOnly"]),
    );
    expect(identifiersOf("/r/train.py", "class Trainer:\n    def fit_model(self):\n        pass\nBATCH_SIZE = 4\n").split(" ")).toEqual(
      expect.arrayContaining(["Trainer", "fit_model", "BATCH_SIZE"]),
    );
    expect(identifiersOf("/r/notes.unknownext", "function secretName() {}")).toBe("");
  });

  it("never takes a literal that could be a key or a token", () => {
    const text = `const a = 'AKIAIOSFODNN7EXAMPLE'\nconst b = "sk-abc123def456"\nconst c = 'xKqPzLmNvB'\nconst d = 'level-change'\n`;
    const found = identifiersOf("/r/config.js", text).split(" ");
    expect(found).toContain("level");
    expect(found).toContain("change");
    for (const secret of ["AKIAIOSFODNN7EXAMPLE", "sk", "abc123def456", "xKqPzLmNvB"]) expect(found).not.toContain(secret);
  });

  it("is bounded: at most 1,000 characters, no word over 40 letters, whatever the file", () => {
    const huge = Array.from({ length: 20_000 }, (_, i) => `function fn${"x".repeat(i % 50)}${i.toString(36).replace(/\d/g, "")}() {}`).join(
      "\n",
    );
    for (const [path, text] of [
      ["/r/huge.js", huge],
      ["/r/huge.md", Array.from({ length: 20_000 }, (_, i) => `## Heading ${"w".repeat(i % 60)}`).join("\n")],
      ["/r/huge.json", JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`key${"k".repeat(i % 70)}`, i])))],
    ] as const) {
      const found = identifiersOf(path, text);
      expect(found.length).toBeGreaterThan(0);
      expect(found.length).toBeLessThanOrEqual(MAX_IDENTIFIERS);
      for (const word of found.split(" ")) expect(word.length).toBeLessThanOrEqual(40);
    }
  });
});

describe("identifiers in the index", () => {
  it("are optional in the entry schema, bounded, and refused when too long on write", () => {
    expect(IndexEntry.safeParse({ path: "/r/a.ts", metadata: "m" }).success).toBe(true);
    expect(IndexEntry.safeParse({ path: "/r/a.ts", metadata: "m", identifiers: "a b" }).success).toBe(true);
    expect(IndexEntry.safeParse({ path: "/r/a.ts", metadata: "m", identifiers: "x".repeat(MAX_IDENTIFIERS_CHARS + 1) }).success).toBe(
      false,
    );
    expect(() => checkEntries([{ path: "/r/a.ts", metadata: "m", identifiers: "x".repeat(MAX_IDENTIFIERS_CHARS + 1) }])).toThrow(
      /identifiers of '\/r\/a.ts'/,
    );
  });

  it("are written by the indexer for the files it reads", async () => {
    const dir = await mkdtemp(join(tmpdir(), "dirigent-identifiers-"));
    try {
      await writeFile(join(dir, "retry.ts"), TS);
      await writeFile(join(dir, "notes.txt"), "just text\n");
      const { entries } = await indexDirectory(dir);
      const retry = entries.find((e) => e.path.endsWith("retry.ts"));
      expect(retry?.identifiers?.split(" ")).toContain("nextDelay");
      expect(entries.find((e) => e.path.endsWith("notes.txt"))?.identifiers).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("are ranked below the path and description, and entries without them (older indexes) still rank", () => {
    const entries = [
      { path: "/r/src/alpha.ts", metadata: "language: TypeScript; Computes the jitter of a retry." },
      { path: "/r/src/beta.ts", metadata: "language: TypeScript; Starts the service.", identifiers: "computeJitter retryDelay" },
      { path: "/r/src/gamma.ts", metadata: "language: TypeScript; Stops the service.", identifiers: "shutdownHooks" },
    ];
    const ranker = new IndexRanker(entries);
    expect(ranker.match("jitter").map((m) => m.path)).toEqual(["/r/src/alpha.ts", "/r/src/beta.ts"]);
    expect(ranker.match("shutdown hooks")[0]?.path).toBe("/r/src/gamma.ts");
    expect(ranker.match("starts the service").map((m) => m.path)).toContain("/r/src/beta.ts");
    // An index written before identifiers existed ranks as it did.
    const old = new IndexRanker(entries.map(({ path, metadata }) => ({ path, metadata })));
    expect(old.match("jitter").map((m) => m.path)).toEqual(["/r/src/alpha.ts"]);
    expect(IDENTIFIERS_WEIGHT).toBeLessThan(1);
  });
});
