/**
 * Workload 5: parse + validate (`parseTemplate`) of a typical template (examples/sequential.xml) and of the
 * largest example of the seeds-xml corpus (../shared/seeds-xml; missing corpus fails loudly). Per call, in µs:
 * median over repeats of the mean of a timed batch, after a warm-up.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, bench, describe } from "vitest";
import { parseTemplate } from "../../machines/language/parse.js";
import { CORPUS_DIR, corpusIndex } from "../support/corpus.js";
import { figureOf, once, record, WHOLE } from "./results.js";

const REPEATS = 7;

/** Mean µs per call over batches of about 200 ms, `REPEATS` times, after a 300 ms warm-up. */
function measure(xml: string): number[] {
  const run = (ms: number) => {
    let calls = 0;
    const start = performance.now();
    while (performance.now() - start < ms) {
      parseTemplate(xml);
      calls++;
    }
    return ((performance.now() - start) * 1000) / calls;
  };
  run(300);
  return Array.from({ length: REPEATS }, () => run(200));
}

let typical: string;
let largest: { file: string; xml: string };

beforeAll(() => {
  typical = readFileSync(fileURLToPath(new URL("../../examples/sequential.xml", import.meta.url)), "utf8");
  corpusIndex(); // throws, naming the path, when the corpus is missing
  const files = readdirSync(join(CORPUS_DIR, "templates"))
    .filter((f) => f.endsWith(".xml"))
    .map((f) => join("templates", f));
  if (files.length === 0) throw new Error(`no templates in the seeds-xml corpus at '${CORPUS_DIR}'`);
  const file = files.reduce((a, b) => (statSync(join(CORPUS_DIR, b)).size > statSync(join(CORPUS_DIR, a)).size ? b : a));
  largest = { file, xml: readFileSync(join(CORPUS_DIR, file), "utf8") };
  const outcome = parseTemplate(typical);
  if (!outcome.ok) throw new Error(`examples/sequential.xml does not parse: ${outcome.error.message}`);
});

describe("5 XML parse + validate", () => {
  bench(
    "typical template and largest corpus example",
    once(() => {
      const typicalUs = measure(typical);
      const largestUs = measure(largest.xml);
      const parsed = parseTemplate(largest.xml);
      record({
        order: 5.1,
        workload: "5 XML parse + validate",
        variant: `typical template (examples/sequential.xml, ${typical.length} B)`,
        unit: "µs",
        figure: figureOf(typicalUs),
      });
      record({
        order: 5.2,
        workload: "5 XML parse + validate",
        variant: `largest corpus example (seeds-xml/${largest.file}, ${largest.xml.length} B${parsed.ok ? "" : ", rejected as invalid"})`,
        unit: "µs",
        figure: figureOf(largestUs),
      });
    }),
    WHOLE,
  );
});
