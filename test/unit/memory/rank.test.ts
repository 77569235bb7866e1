import { describe, expect, it } from "vitest";
import { IndexRanker, queryText, words } from "../../../actors/memory/rank.js";
import { stem } from "../../../actors/memory/stem.js";

const entries = [
  {
    path: "/repo/machines/language/parse.ts",
    metadata: "language: TypeScript; size: 9 KB; Parses XML task templates into nodes. exports: parseTemplate, ParseResult",
  },
  {
    path: "/repo/machines/language/substitute.ts",
    metadata: "language: TypeScript; size: 3 KB; Substitutes {{var}} placeholders. exports: substitute",
  },
  { path: "/repo/runtime/nats/bus.ts", metadata: "language: TypeScript; size: 8 KB; Bus over NATS core. exports: NatsBus, connectNats" },
  { path: "/repo/docs/memory.md", metadata: "language: Markdown; size: 4 KB; Memory: the global file-metadata index" },
  { path: "/repo/scripts/train_model.py", metadata: "language: Python; size: 2 KB; Trains the classifier. defines: train, Classifier" },
];

describe("ranking with MiniSearch", () => {
  const ranker = new IndexRanker(entries);

  it("splits words at camelCase and punctuation and drops stop words", () => {
    expect(words("parseTemplate for the XMLParser, nats-bus")).toEqual([
      "parsetemplate",
      "parse",
      "template",
      "xmlparser",
      "xml",
      "parser",
      "nats",
      "bus",
    ]);
  });

  it("puts the obviously right file first, with scores in [0, 1] best first", () => {
    const matches = ranker.match("parse the xml template");
    expect(matches[0]?.path).toBe("/repo/machines/language/parse.ts");
    expect(matches[0]?.relevance).toContain("matched");
    for (const m of matches) expect(m.score).toBeGreaterThanOrEqual(0);
    for (const m of matches) expect(m.score).toBeLessThanOrEqual(1);
    const scores = matches.map((m) => m.score ?? 0);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
  });

  it("matches prefixes and misspellings", () => {
    expect(ranker.match("classif")[0]?.path).toBe("/repo/scripts/train_model.py");
    expect(ranker.match("substitue placeholders")[0]?.path).toBe("/repo/machines/language/substitute.ts");
  });

  it("matches words by their stems, and names the query words as typed", () => {
    const stemmed = new IndexRanker([
      { path: "/r/docs/billing.md", metadata: "language: Markdown; Billing; Invoice rounding rules and VAT computation." },
      { path: "/r/src/retry-backoff.ts", metadata: "language: TypeScript; exports: delayFor" },
      { path: "/r/src/setup.ts", metadata: "language: TypeScript; Starts the service." },
    ]);
    const [best] = stemmed.match("where are invoices rounded when computing");
    expect(best?.path).toBe("/r/docs/billing.md");
    expect(best?.relevance.split(":")[0]?.replace("matched ", "").split(", ").sort()).toEqual(["computing", "invoices", "rounded"]);
    expect(stemmed.match("retries delayed")[0]?.path).toBe("/r/src/retry-backoff.ts");
  });

  it("ranks tests, fixtures and benchmarks below the code they exercise, unless the query asks for tests", () => {
    const ranker = new IndexRanker([
      { path: "/r/test/redact.test.js", metadata: "language: JavaScript; tests: redact option, redact paths" },
      { path: "/r/test/fixtures/redact-paths.js", metadata: "language: JavaScript; keywords: redact, paths" },
      { path: "/r/lib/redaction.js", metadata: "language: JavaScript; exports: redaction; keywords: redact, paths" },
    ]);
    expect(ranker.match("redact paths")[0]?.path).toBe("/r/lib/redaction.js");
    expect(ranker.match("tests of redact paths")[0]?.path).toBe("/r/test/redact.test.js");
  });

  it("finds a compound file name written in lower case by its tail", () => {
    const ranker = new IndexRanker([
      { path: "/r/lib/multistream.js", metadata: "language: JavaScript; exports: multistream" },
      { path: "/r/lib/levels.js", metadata: "language: JavaScript; exports: mappings" },
    ]);
    expect(ranker.match("several streams")[0]?.path).toBe("/r/lib/multistream.js");
  });

  it("stems as Porter's algorithm does, and leaves other words alone", () => {
    const plain = [
      "caresses",
      "ponies",
      "rounding",
      "computation",
      "computed",
      "retries",
      "retry",
      "relational",
      "hopping",
      "filing",
      "happy",
    ];
    expect(plain.map(stem)).toEqual(["caress", "poni", "round", "comput", "comput", "retri", "retri", "relat", "hop", "file", "happi"]);
    expect(["generalization", "yield", "xml", "v8", "größe", "a".repeat(50)].map(stem)).toEqual([
      "gener",
      "yield",
      "xml",
      "v8",
      "größe",
      "a".repeat(50),
    ]);
  });

  it("returns nothing for a query of stop words or an empty index, and honours the limit", () => {
    expect(ranker.match("the of and")).toEqual([]);
    expect(new IndexRanker([]).match("xml")).toEqual([]);
    expect(ranker.match("typescript", 2)).toHaveLength(2);
  });

  it("queries with the description, the seed-era text and short string inputs", () => {
    const text = queryText({
      type: "memory.match",
      templateDescription: "fix",
      templateType: "atomic",
      taskText: "bus",
      inputs: { a: "nats", b: 3, c: "x".repeat(300) },
    });
    expect(text).toBe("fix bus nats");
  });

  it("lets words common in a large index re-order the candidates without selecting them", () => {
    const many = Array.from({ length: 1200 }, (_, n) => ({
      path: `/big/src/module-${n}.ts`,
      metadata: `language: TypeScript; helper number ${n}`,
    }));
    const big = new IndexRanker([
      ...many,
      { path: "/big/src/widget.py", metadata: "language: Python; draws the widget" },
      { path: "/big/src/widget.ts", metadata: "language: TypeScript; draws the widget" },
      { path: "/big/src/ranker.ts", metadata: "language: TypeScript; ranks files with MiniSearch" },
    ]);
    expect(big.match("typescript widget").map((m) => m.path)).toEqual(["/big/src/widget.ts", "/big/src/widget.py"]);
    expect(big.match("typescript ranker minisearch")[0]?.path).toBe("/big/src/ranker.ts");
    expect(big.match("typescript helper", 3)).toHaveLength(3);
  });

  it("lets an unknown word stand for the common words it starts, and ranks a query of common words alone", () => {
    const many = Array.from({ length: 1200 }, (_, n) => ({
      path: `/big/src/module-${n}.ts`,
      metadata: `language: TypeScript; helper number ${n}${n % 2 === 0 ? " with extras" : ""}`,
    }));
    const big = new IndexRanker([
      ...many,
      { path: "/big/src/widget.py", metadata: "language: Python; draws the widget" },
      { path: "/big/src/widget.ts", metadata: "language: TypeScript; draws the widget" },
    ]);
    expect(big.match("typescr widget").map((m) => m.path)).toEqual(["/big/src/widget.ts", "/big/src/widget.py"]);
    const common = big.match("helper extras", 5);
    expect(common).toHaveLength(5);
    for (const m of common) expect(m.relevance).toMatch(/^matched (helper, extras|extras, helper):/);
  });

  it("searches the rarest words in MiniSearch and scores candidates with the others from their id lists", () => {
    // alpha and beta are each in 450 of 1200 entries: not common, but over the budget together.
    const many = Array.from({ length: 1200 }, (_, n) => ({
      path: `/big/lib/unit-${n}.ts`,
      metadata: `language: TypeScript; ${n % 8 < 3 ? "alpha " : ""}${n % 8 >= 2 && n % 8 < 5 ? "beta " : ""}${n === 10 || n === 11 ? "gamma " : ""}code`,
    }));
    const ranker = new IndexRanker(many);
    // unit-10 (n % 8 = 2) holds alpha, beta and gamma; unit-11 (n % 8 = 3) only beta and gamma.
    expect(ranker.match("alpha beta gamma").map((m) => m.path)).toEqual(["/big/lib/unit-10.ts", "/big/lib/unit-11.ts"]);
    // alpha is searched, beta then only scores: entries with both come first.
    const both = ranker.match("alpha beta", 10);
    expect(both).toHaveLength(10);
    for (const m of both) expect(Number(/unit-(\d+)/.exec(m.path)?.[1]) % 8).toBe(2);
  });

  it("builds the same ranker in slices without blocking", async () => {
    const sliced = await IndexRanker.build(entries);
    expect(sliced.match("parse the xml template")).toEqual(ranker.match("parse the xml template"));
    expect(sliced.size).toBe(entries.length);
  });
});
