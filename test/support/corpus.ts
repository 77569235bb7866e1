/**
 * The seeds-xml corpus (../shared/seeds-xml, or `DIRIGENT_SEEDS_XML`) as test input: which examples execute end to
 * end through the real pipeline, with which inputs (./corpus-runs.ts), and why the others do not (./corpus-refusals.ts),
 * both re-exported here, and the docs table made from them. `test/integration/corpus-run.test.ts`
 * runs the runnable ones; `test/unit/template/corpus-doc.test.ts` checks that docs/corpus.md is this table.
 * The corpus files are read at test time and never copied into the repository.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { parseTemplate } from "../../machines/language/parse.js";
import { RUNS } from "./corpus-runs.js";
import { NOT_RUN } from "./corpus-refusals.js";

export * from "./corpus-runs.js";
export * from "./corpus-refusals.js";

const REPO = join(import.meta.dirname, "../..");

/**
 * Where the corpus is: `DIRIGENT_SEEDS_XML`; else `shared/seeds-xml` beside this repository; else beside the repository
 * this one was cloned from, when that is a directory here (a clean clone made elsewhere, e.g. `git clone . /tmp/x`).
 */
export const CORPUS_DIR =
  process.env.DIRIGENT_SEEDS_XML ?? corpusBeside(REPO) ?? corpusBeside(localOrigin()) ?? join(REPO, "../shared/seeds-xml");

function corpusBeside(repo: string | undefined): string | undefined {
  const dir = repo === undefined ? undefined : join(repo, "../shared/seeds-xml");
  return dir !== undefined && existsSync(join(dir, "index.json")) ? dir : undefined;
}

/** The repository this one was cloned from, when its `origin` is a local directory. */
function localOrigin(): string | undefined {
  try {
    const url = execFileSync("git", ["-C", REPO, "config", "--get", "remote.origin.url"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
    return isAbsolute(url) ? url : undefined;
  } catch {
    return undefined;
  }
}

/** One entry of the corpus's `index.json`. */
export interface CorpusEntry {
  id: string;
  file: string;
  category: string;
  era: string;
  wellformed: boolean;
  root: string;
}

/** The corpus index; throws when the corpus is missing. */
export function corpusIndex(): CorpusEntry[] {
  if (!existsSync(join(CORPUS_DIR, "index.json"))) {
    throw new Error(`the seeds-xml corpus is missing at '${CORPUS_DIR}': put shared/ beside the repository or set DIRIGENT_SEEDS_XML`);
  }
  return JSON.parse(readFileSync(join(CORPUS_DIR, "index.json"), "utf8")) as CorpusEntry[];
}

/** The text of a corpus file (`templates/<id>.xml`, or a path relative to the corpus). */
export function corpusText(idOrFile: string): string {
  return readFileSync(join(CORPUS_DIR, idOrFile.includes("/") ? idOrFile : `templates/${idOrFile}.xml`), "utf8");
}

/** Files executed as the definitions another run calls. */
function calledBy(id: string): string | undefined {
  return RUNS.find((r) => r.with?.includes(id))?.id;
}

/** The kind of a corpus file, from its parse (or its root element when it does not parse). */
function kindOf(entry: CorpusEntry, text: string): string {
  if (entry.category === "xsd") return "XSD fragment";
  const parsed = parseTemplate(text);
  if (!parsed.ok) return `\`<${entry.root}>\``;
  const d = parsed.document;
  const e = d.entry;
  const entryKind = !e
    ? undefined
    : e.kind === "task"
      ? `${e.type}${e.subtype ? `/${e.subtype}` : ""} task`
      : e.kind === "call"
        ? `call ${e.templateName}`
        : e.kind;
  const parts = [
    ...(entryKind ? [entryKind] : []),
    ...(d.templates.length > 0 ? [`template ${d.templates.map((t) => t.name).join(", ")}`] : []),
  ];
  if (parts.length === 0) parts.push(`\`<${entry.root}>\` fragment`);
  const top = d.nodes.length;
  return parts.join(" + ") + (top > 1 ? ` (${top} top-level)` : "");
}

function parsesOf(text: string, entry: CorpusEntry): string {
  const parsed = parseTemplate(text);
  if (parsed.ok && entry.category === "xsd") {
    const unknown =
      parsed.document.nodes.every((n) => n.kind === "element" || n.kind === "fragment") && parsed.document.templates.length === 0;
    return unknown ? "yes, as unknown elements" : "yes";
  }
  if (parsed.ok) return "yes";
  const message = parsed.error.message.replace(/\|/g, "\\|").replace(/\s+/g, " ");
  return `no: \`${message.length > 70 ? `${message.slice(0, 67)}…` : message}\``;
}

function executesOf(entry: CorpusEntry): string {
  if (entry.category === "xsd") return "no: a schema fragment, not a task";
  if (entry.category === "grammar") return "no: a grammar example (`full|none|subset` placeholders)".replace(/\|/g, "\\|");
  if (entry.era !== "xml-era" && !RUNS.some((r) => r.id === entry.id) && NOT_RUN[entry.id] === undefined) return "no: S-expression era";
  const run = RUNS.find((r) => r.id === entry.id);
  if (run) return `**yes**: ${run.shows}`;
  const caller = calledBy(entry.id);
  if (caller) return `**yes**, called by ${caller}`;
  const reason = NOT_RUN[entry.id];
  return reason === undefined ? "**unclassified**" : `no: ${reason}`;
}

/** Template-corpus ids neither in {@link RUNS}, nor called by one, nor in {@link NOT_RUN}. */
export function unclassified(): string[] {
  return corpusIndex()
    .filter((e) => e.category === "template")
    .map((e) => e.id)
    .filter((id) => !RUNS.some((r) => r.id === id) && calledBy(id) === undefined && NOT_RUN[id] === undefined);
}

/** The markdown table of every corpus file, as in docs/corpus.md. */
export function corpusTable(): string {
  const order = ["templates", "grammar", "xsd"];
  const entries = corpusIndex().sort(
    (a, b) => order.indexOf(a.file.split("/")[0] ?? "") - order.indexOf(b.file.split("/")[0] ?? "") || a.file.localeCompare(b.file),
  );
  const rows = entries.map((entry) => {
    const text = corpusText(entry.file);
    const era = entry.era === "xml-era" ? "" : " (S-exp era)";
    return `| \`${entry.file}\`${era} | ${kindOf(entry, text)} | ${parsesOf(text, entry)} | ${executesOf(entry)} |`;
  });
  return ["| File | Kind | Parses | Executes end to end |", "| --- | --- | --- | --- |", ...rows].join("\n") + "\n";
}

/** Marker lines around the generated table in docs/corpus.md. */
export const TABLE_BEGIN = "<!-- corpus-table:begin (generated from test/support/corpus.ts; see test/unit/template/corpus-doc.test.ts) -->";
export const TABLE_END = "<!-- corpus-table:end -->";
