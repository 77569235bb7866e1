import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonSchemas } from "../../runtime/schemas.js";

const dir = join(import.meta.dirname, "../../schemas");

describe("checked-in JSON Schemas", () => {
  it("match the zod schemas in protocol/ (run 'npm run schemas' after changing a message)", () => {
    const generated = jsonSchemas();
    const files = readdirSync(dir)
      .filter((f) => f.endsWith(".json"))
      .sort();
    expect(files).toEqual(
      Object.keys(generated)
        .map((n) => `${n}.json`)
        .sort(),
    );
    for (const [name, schema] of Object.entries(generated)) {
      const stored: unknown = JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8"));
      expect(stored, `schemas/${name}.json is stale: run 'npm run schemas'`).toEqual(schema);
    }
  });
});
