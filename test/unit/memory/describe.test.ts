import { describe as suite, expect, it } from "vitest";
import { describe, languageOf, looksBinary, metadataOf } from "../../../runtime/indexer/describe.js";

suite("file descriptions", () => {
  it("takes the first Markdown heading", () => {
    expect(describe("/r/README.md", "intro\n\n## Getting started\n# Later")).toBe("Getting started");
  });

  it("takes the leading comment and exported names of TypeScript", () => {
    const text =
      "/**\n * Parses XML task templates. More text.\n * @module\n */\nexport function parseTemplate() {}\nexport class Parser {}\nconst hidden = 1;\n";
    expect(describe("/r/parse.ts", text)).toBe("Parses XML task templates.; exports: parseTemplate, Parser");
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
