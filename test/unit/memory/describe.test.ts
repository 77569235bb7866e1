import { describe as suite, expect, it } from "vitest";
import { describe, languageOf, looksBinary, metadataOf } from "../../../runtime/indexer/describe.js";

suite("file descriptions", () => {
  it("takes a Markdown file's first heading, its first paragraph and its other headings", () => {
    expect(describe("/r/README.md", "intro\n\n## Getting started\n# Later")).toBe("Getting started; intro; sections: Later");
    const billing = "# Billing\n\nInvoice rounding rules and VAT computation.\n\n## Credit notes\n\nRefunds.\n\n## Rounding ##\n";
    expect(describe("/r/docs/billing.md", billing)).toBe(
      "Billing; Invoice rounding rules and VAT computation.; sections: Credit notes, Rounding",
    );
    // Badges, code and a table of contents are not the first paragraph; links keep their text.
    const readme =
      "---\ntitle: x\n---\n# pino\n[![CI](https://ci/badge.svg)](https://ci)\n\n* [Install](#install)\n* [Usage](#usage)\n\n```js\nconst x = 1\n```\n\nA very low overhead [logger](https://getpino.io). It is *fast*.\n";
    expect(describe("/r/README.md", readme)).toBe("pino; A very low overhead logger. It is fast.; keywords: install, usage");
    expect(describe("/r/list.md", "# Steps\n\n- clone the repository\n- run the build\n")).toBe(
      "Steps; clone the repository, run the build",
    );
  });

  it("keeps within 240 characters, cut at a word", () => {
    const long = `# Title\n\n${"Rounding of invoices is described here. ".repeat(3)}\n\n${Array.from({ length: 12 }, (_, i) => `## Section number ${i}\n`).join("")}`;
    const text = describe("/r/long.md", long);
    expect(text.length).toBeLessThanOrEqual(240);
    expect(text).toMatch(
      /^Title; (Rounding of invoices is described here\. ){2}Rounding of invoices is described here\.; sections: Section number 0, .*, Section\.\.\.$/,
    );
  });

  it("takes the leading comment and exported names of TypeScript", () => {
    const text =
      "/**\n * Parses XML task templates. More text.\n * @module\n */\nexport function parseTemplate() {}\nexport class Parser {}\nconst hidden = 1;\n";
    expect(describe("/r/parse.ts", text)).toBe("Parses XML task templates. More text.; exports: parseTemplate, Parser");
  });

  it("passes over licence headers and linter directives, and reads CommonJS exports, top-level names and test names", () => {
    const text = [
      "'use strict'",
      "/*",
      " * Copyright 2020 The Authors. Licensed under the Apache License, Version 2.0.",
      " */",
      "/* eslint no-prototype-builtins: 0 */",
      "// Computes the retry backoff with jitter.",
      "function backoff (attempt) {}",
      "const jitter = (ms) => ms",
      "async function sleep () {}",
      "module.exports = { backoff, jitter: jitter, ...rest }",
      "exports.extra = 1",
    ].join("\n");
    expect(describe("/r/lib/retry.js", text)).toBe(
      "Computes the retry backoff with jitter.; exports: extra, backoff, jitter, rest; defines: sleep",
    );
    expect(
      describe("/r/lib/a.js", "// const old = 1\nmodule.exports = function build () {}\n// Builds the stream for a worker thread.\n"),
    ).toBe("Builds the stream for a worker thread.; exports: build");
    const tests = "const t = require('tap')\ntest('redact option throws if not array', () => {})\nit(\"masks nested paths\", () => {})\n";
    expect(describe("/r/test/redact.test.js", tests)).toBe("tests: redact option throws if not array, masks nested paths");
    expect(describe("/r/esm.ts", "export { a, b as c };\nexport type { T } from './t.js';\n")).toBe("exports: a, c, T");
  });

  it("fills the rest of the room with the words the file uses most, counted by stem", () => {
    const text =
      "// Sends the report.\nconst pending = []\nfunction flushQueue (item) { pending.push(item); send(pending, items) }\nmodule.exports = flushQueue\n";
    // `item` and `items` are one word; `const`, `function`, words used once and words already there are not keywords.
    expect(describe("/r/report.js", text)).toBe("Sends the report.; exports: flushQueue; keywords: pending, item");
  });

  it("describes JSON by its name, description and keys", () => {
    expect(describe("/r/package.json", '{"name": "pino", "description": "fast logger", "main": "pino.js"}')).toBe(
      "pino; fast logger; keys: name, description, main",
    );
    expect(describe("/r/cut.json", '{"name": "pi')).toBe('{"name": "pi');
  });

  it("takes the module docstring and def/class names of Python", () => {
    const text =
      '#!/usr/bin/env python\n"""Train the classifier.\n\nDetails."""\nimport os\n\nclass Model:\n    def inner(self): pass\n\ndef train():\n    pass\n';
    expect(describe("/r/train.py", text)).toBe("Train the classifier.; defines: Model, train");
  });

  it("falls back to a leading # comment or the first line", () => {
    expect(describe("/r/run.sh", "#!/bin/sh\n# Runs the nightly build.\nmake\n")).toBe("Runs the nightly build.");
    expect(describe("/r/notes", "\nfirst line here\nsecond")).toBe("first line here");
  });

  it("builds the metadata line and knows languages and binaries", () => {
    expect(metadataOf("/r/a.py", 2048, "Trains.")).toBe("language: Python; size: 2.0 KB; name: a.py; Trains.");
    expect(languageOf("/r/Dockerfile")).toBe("Dockerfile");
    expect(languageOf("/r/x.unknownext")).toBeUndefined();
    expect(looksBinary(new Uint8Array([65, 0, 66]))).toBe(true);
    expect(looksBinary(new TextEncoder().encode("text"))).toBe(false);
  });
});
