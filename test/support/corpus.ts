/**
 * The seeds-xml corpus (../shared/seeds-xml, or `DIRIGENT_SEEDS_XML`) as test input: which examples execute end to
 * end through the real pipeline, with which inputs, and why the others do not. `test/integration/corpus-run.test.ts`
 * runs the runnable ones; `test/unit/template/corpus-doc.test.ts` checks that docs/corpus.md is this table.
 * The corpus files are read at test time and never copied into the repository.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { parseTemplate } from "../../machines/language/parse.js";

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

/** A corpus example that executes end to end. */
export interface CorpusRun {
  /** The template file whose entry runs. */
  id: string;
  /** Files whose definitions it calls, read before it (a `<template>` defined in another snippet). */
  with?: readonly string[];
  /**
   * Submitted inputs; `$SCRIPT` is replaced with the path of a harmless script in the test's temporary workspace,
   * `$ENV_SCRIPT` with one that prints which of its environment variables are set.
   */
  inputs: Readonly<Record<string, unknown>>;
  /** What the run shows, for the docs table. */
  shows: string;
}

/** The examples that execute end to end against `dirigent mock-llm`. */
export const RUNS: readonly CorpusRun[] = [
  // Atomic tasks.
  { id: "dfbeff3b6abb", inputs: {}, shows: "`<instructions>`, `<system>` and `<model>` reach the model" },
  { id: "84a43f2433a5", inputs: {}, shows: "`<instructions>`, `<system>` and `<model>` reach the model (`<criteria>` is read)" },
  {
    id: "47d1cdc5340b",
    inputs: {},
    shows: '`<instructions>`, `<system>` and `<model>` reach the model; `<output_format type="json">` accepts the JSON answer',
  },
  {
    id: "e6adcaf3dfdd",
    inputs: { code: "def add(a, b): return a + b", requirements: "cover negatives", code_type: "Python functions" },
    shows: "`from` inputs; `{{code_type}}` substituted",
  },
  { id: "d620f30e87a1", inputs: { user_query: "sort descending" }, shows: "a `from` input" },
  { id: "f147551b2d12", inputs: {}, shows: "an `<input>` described in prose is skipped" },
  { id: "e5909e64f566", inputs: {}, shows: '`<output_format type="json" schema="string[]">`' },
  { id: "51107ab52440", inputs: {}, shows: '`<output_format type="json" schema="string[]">`' },
  { id: "c2ff270f9ffe", inputs: {}, shows: "the entry task; the `<template>` beside it is registered" },
  { id: "ed08d1b67050", inputs: {}, shows: "a plain atomic task with `<context_management>`" },
  { id: "b55abb22bca1", inputs: {}, shows: "the first of two equivalent tasks" },
  { id: "fd1b3d7ed19b", inputs: {}, shows: "a plain atomic task; `fresh_context` asks Memory, which matches none of the indexed files" },
  { id: "25ab2e572ead", inputs: {}, shows: "a plain atomic task; `fresh_context` asks Memory, which matches none of the indexed files" },
  {
    id: "64e63be98e84",
    inputs: {},
    shows:
      "its first task; `fresh_context` asks Memory, which matches none of the indexed files (the third task is the invalid combination)",
  },
  // Context: files of the test's workspace and its Memory index.
  { id: "63d692d8f6f7", inputs: {}, shows: "`<file_paths>`: ./src/main.py and ./src/utils.py of the workspace reach the model" },
  { id: "62abdbfa3f37", inputs: {}, shows: "`<file_paths>` together with `fresh_context`: both files reach the model" },
  {
    id: "84671f2bc428",
    inputs: {},
    shows:
      "`<file_paths>`: ./src/main.py reaches the model; /absolute/path/file.txt (outside the workspace) is listed in `context_file_errors`",
  },
  {
    id: "0d37710bc581",
    inputs: {},
    shows:
      'its first task, `<file_paths source="literal">`: ./src/main.py reaches the model, /absolute/path/file.txt is listed in `context_file_errors`',
  },
  {
    id: "ffc4c9ca5655",
    inputs: {},
    shows:
      'its first task, `<file_paths source="literal">`: ./src/main.py reaches the model, /absolute/path/file.txt is listed in `context_file_errors`',
  },
  {
    id: "16473f3de444",
    inputs: {},
    shows: '`<file_paths source="description">`: Memory matches the block\'s description; the authentication file comes first',
  },
  // Subtasks and the dynamic director–evaluator (CONTINUATION).
  {
    id: "4bb39876dd93",
    inputs: {},
    shows:
      "the parent's session asks `run_subtask` with the request the second snippet sketches; the child runs and the parent continues with its answer",
  },
  {
    id: "5e468bd92cfd",
    inputs: {
      user_query: "DYNAMIC sort a list",
      current_iteration: 1,
      max_attempts: 3,
      last_evaluator_output: "",
      last_director_output: "",
    },
    shows:
      "a director of a dynamic loop: it asks `request_evaluation`, a script and the built-in evaluator run, the director finishes (the loop state is submitted as inputs; its `<output_slot>` binds nothing outside a sequential)",
  },
  {
    id: "560c5290b149",
    inputs: {
      task_description: "sorting",
      user_query: "STATIC sort a list",
      current_iteration: 1,
      last_evaluator_output: "",
      script_path: "$SCRIPT",
    },
    shows:
      "the static director–script–evaluator pipeline: each step's `<output_slot>` (`last_director_output`, `script_result`) is bound for the later steps (seed-era wiring)",
  },
  // Sequential tasks.
  { id: "4138332fd1bc", inputs: {}, shows: "steps whose inputs are nested tasks; `step n/2` events" },
  { id: "4ad3cd6e5632", inputs: {}, shows: "steps whose inputs are nested tasks; `step n/2` events" },
  { id: "5dcf8d3076bc", inputs: {}, shows: "one step with a nested input task" },
  { id: "d01c431b1738", inputs: {}, shows: "two steps (`<rebuild_memory>` is ignored)" },
  { id: "f37c261cb97c", inputs: {}, shows: "two steps, `notes_only` history" },
  { id: "8c7742bdee80", inputs: {}, shows: "its first task (two steps); the second snippet is not the entry" },
  { id: "d49342009b07", inputs: {}, shows: "two steps with nested input tasks" },
  { id: "816b8013fdff", inputs: {}, shows: "two steps with nested input tasks" },
  { id: "452d0bdb82d6", inputs: {}, shows: "two steps with literal inputs, `full_output` history" },
  {
    id: "8cc320cbc775",
    inputs: { dataset_name: "tide gauges", config_profile: "coastal-profile", raw_data: "1,2,3", default_config: "{}" },
    shows: "`from` inputs; `{{config_profile}}` substituted in a step",
  },
  { id: "3e2866618b4a", inputs: {}, shows: "three steps" },
  { id: "48224212868d", inputs: {}, shows: "its first task (two steps)" },
  { id: "0af127b9fd2d", inputs: {}, shows: "two steps" },
  { id: "cc8acdccb6f3", inputs: {}, shows: "two steps, `full_output` history" },
  { id: "d910281fec6b", inputs: { csv_file_path: "data/tides.csv" }, shows: "its first task, a `from` input" },
  { id: "87f57386490e", inputs: { csv_file_path: "data/tides.csv" }, shows: "a `from` input, default context settings" },
  { id: "ab5749aceef7", inputs: { csv_file_path: "data/tides.csv" }, shows: "a `from` input, `full_output` history" },
  { id: "49548d5ca76a", inputs: { csv_file_path: "data/tides.csv" }, shows: "its first task (the loop after it is not the entry)" },
  { id: "4b65420b008d", inputs: {}, shows: "three steps, one with a nested input task" },
  // Reduce.
  { id: "cef58ebebd47", inputs: {}, shows: "three items, each with a nested metadata task; `input n/3` events" },
  // Cond.
  {
    id: "53130303210e",
    inputs: { output: { valid: true } },
    shows: "the first case (`output.valid == true`); the test also runs the second",
  },
  { id: "94d24a77d0cc", inputs: { output: { valid: false, errors: 2 } }, shows: "the second case (`output.errors > 0`)" },
  // Function templates and calls.
  {
    id: "6ef53bedc098",
    inputs: { weather_data: "rain 12 mm", standard_config: "daily means" },
    shows: "a `<template>` and its `<call>`; arguments resolved as variables",
  },
  {
    id: "b13e0e468128",
    with: ["93122e8ca4d7"],
    inputs: {},
    shows: "a `<call>` of the template in 93122e8ca4d7; unbound arguments stay literal",
  },
  {
    id: "50e5244492ee",
    with: ["92d2026bdd13"],
    inputs: { user_input: "ada@example.com" },
    shows: "a `<call template>` of 92d2026bdd13; one variable, one literal argument",
  },
  {
    id: "261e10e19a86",
    with: ["a75962761949"],
    inputs: { user_input: "ada@example.com", validation_schema: "email" },
    shows: "a `<call task>` of the function-style task in a75962761949",
  },
  {
    id: "00f0c4d55772",
    inputs: { user_name: "Alice" },
    shows: "the documented failure: a template without parameters does not see the caller's `user_name`",
  },
  // Script.
  {
    id: "d8dbc8ca2332",
    inputs: { director_output: "print(1)", script_path: "$ENV_SCRIPT" },
    shows: '`{{script_path}}` runs a harmless script in a temporary workspace; `<environment inherit="none"/>` gives it no variables',
  },
  // Director–evaluator loops.
  {
    id: "3df504a17226",
    inputs: { user_query: "LOOP-A sort a list", task_description: "sorting", script_path: "$SCRIPT" },
    shows: "two iterations with a script; the evaluator says success in the second",
  },
  {
    id: "62e9b8040c3e",
    inputs: { user_query: "LOOP-B parse a date", task_description: "dates", script_path: "$SCRIPT" },
    shows: "one iteration; the evaluator says success",
  },
];

const NO_PROMPT = "has neither `<description>` nor `<instructions>`: fails `input_validation_failure` (nothing to ask the model)";
const SCRIPT_NO_COMMAND = "its `script` step has no `<command>` (fails `input_validation_failure`)";
const AIDER =
  "needs Aider: the `aider_*` subtypes are not modelled (given `user_query` and `task_description` it runs as a plain model session, and its `<file_paths>` are placeholders)";
const TEMPLATE_ONLY = "defines a template only, and no example calls it";

/** Why each other example does not execute end to end. */
export const NOT_RUN: Readonly<Record<string, string>> = {
  // Malformed on purpose (or truncated) in the source documents.
  "7bbac7b2b8d8": "malformed: `</description>` closes `<task_instructions>`",
  "4c9ea69cd436": "malformed: a bare `&&` in `<condition>`",
  f00380213f0a: "malformed: the snippet stops after the start tag",
  // Task types and elements this release does not execute.
  "3420604979f1":
    "`reparse` task type: `not_supported` (reparsing is not a task to write: an atomic task that runs out of a resource is decomposed by the Compiler on its own)",
  "584adbd0e116": "`associative_memory` task type: `not_supported`",
  d321a2f05774: "`map` task type: `not_supported`",
  "7ff9a6a21b40":
    "`composite` task type: `not_supported` (the `<task ref>` inside it names `load_csv` of the `<library>` element beside it, which is not a template library)",
  "04aa368d28b4": "`function` task type (`<body>`, `<step>`): `not_supported`",
  "996bc568ce48": "`director-evaluator` (hyphenated) task type: `not_supported`",
  a260d6351e86:
    "skeleton loop: no `<director>`/`<evaluator>` (`<!-- other elements -->`): fails `input_validation_failure` (requires a `<director>`)",
  fc1d15cc2446: `elided bodies (\`...\`): the entry \`director\` task ${NO_PROMPT}`,
  "7201be24ed20": "a `<function>` element with an elided body; nothing to run",
  // Skeletons: the body is a comment.
  "7633fff735bb": "skeleton: `<steps>` holds only a comment (completes with no work)",
  d9f1f3e40fca: "skeleton: `<steps>` holds only a comment (completes with no work)",
  "6bbf3c82f4f3": "skeleton: `<steps>` holds only a comment (completes with no work)",
  fd963a5f1643: "skeleton: inner and reduction tasks are comments, no inputs (completes with no work)",
  // Output slots between top-level tasks: a slot binds only for the later steps of a sequential (seed-era wiring).
  f3123cdf42f7: `a director and an evaluator joined by \`<output_slot>\`/\`<input_source>\` as two top-level tasks (slots bind only between steps of a sequential); the entry director ${NO_PROMPT}`,
  "3fb9c09a413d": `a director and an evaluator joined by \`<output_slot>\`/\`<input_source>\` as two top-level tasks (slots bind only between steps of a sequential); the entry director ${NO_PROMPT}`,
  "90443609d032": `the entry is the director of a pair joined by \`<output_slot>\`/\`<input_source>\` as top-level tasks (slots bind only between steps of a sequential); it ${NO_PROMPT}`,
  a4c2c3ffc8e4: "a fragment (`<input>` with `<source_var>`); nothing to run",
  // Script steps without a command, or data passed in ways not modelled.
  "3bc075029304": SCRIPT_NO_COMMAND,
  "79e1bf7ff43e": SCRIPT_NO_COMMAND,
  "79716b0f1827": SCRIPT_NO_COMMAND,
  "715028df6d14": SCRIPT_NO_COMMAND,
  b633f13fc82b:
    "`from=\"previous_step\"` is no binding of a sequential (it binds `previous_result`): step 2 fails `input_validation_failure` (missing 'previous_step'); that `script` step has no `<command>` either",
  "246e0891885e":
    "`from=\"last_director_output\"` names a variable no step binds (its first step has no `<output_slot>`): step 2 fails `input_validation_failure` (missing 'last_director_output'); that `script` step has no `<command>` either",
  eada2887e0b8:
    "`from=\"env:data_source\"` reads an environment variable, not modelled: fails `input_validation_failure` (missing 'env:data_source')",
  af4c5de7c07f:
    "calls `get_file_info` (8fafe594bcb5); with it, the call gets the literal text `result[0]`, a name no sequential binds (it binds `step_results`), not the listing's first entry; alone it fails `input_validation_failure` (unknown template)",
  "38806f96974b":
    "`<code>` steps are not modelled (ignored with a parse warning, so `directory_listing` is never bound) and a step's `parsedContent` is not in `step_results`; calls `get_file_info` (8fafe594bcb5), alone it fails `input_validation_failure` (unknown template)",
  be2ceb76f1c5:
    "a `<code>` step (not modelled: ignored with a parse warning), and calls `process_data`, defined nowhere in the corpus: fails `input_validation_failure` (unknown template)",
  "9fce86f3a7b0": "calls `process_data`, defined nowhere in the corpus: fails `input_validation_failure` (unknown template)",
  "91f1ebe0f2ca":
    "calls `validate_input` (a75962761949) and `process_validated_data`, defined nowhere in the corpus: fails `input_validation_failure` (unknown template)",
  a5d762e91af7:
    "calls `validate_input` (92d2026bdd13) and `process_validated_data`, defined nowhere in the corpus: fails `input_validation_failure` (unknown template)",
  // Conditions the test language does not read.
  "01ec01468f7e": `\`$.valid\` (JSONPath) is not in the test language: both tests are \`cond.test_error\`, no case runs (each body has neither \`<description>\` nor \`<instructions>\` and would fail \`input_validation_failure\`)`,
  // Context and files.
  "26b7a8980cc0":
    '`<file_paths source="command">` pipes `find` into `grep`; `find` is not in the harness\'s command allowlist (`DIRIGENT_COMMANDS`), so the task fails `input_validation_failure` naming it, before anything runs',
  "56e3ba324d1f":
    "its point is `<context_relevance>`/`<context_assembly>`, which the runtime ignores with a parse warning (it runs as a plain atomic task)",
  bb3be6c47bfa:
    "`associative_matching` subtype: not modelled, it runs as a plain model session (no Memory match), so the model, not Memory, would list the files",
  b9b569a831d1: `\`assoc_match\` subtype with \`<param>\`/\`<return>\` inputs; the task ${NO_PROMPT}`,
  "8a0ed3fa5900": `only \`<context_management>\`, so the task ${NO_PROMPT}`,
  "258a2770a28c": AIDER,
  a7adbbf9a259: AIDER,
  a78ecb3b48bc: AIDER,
  "6c5c1ec0cee5": AIDER,
  "68b17d387177": AIDER,
  // Definitions and fragments.
  "8fafe594bcb5": "defines `get_file_info`; its callers (af4c5de7c07f, 38806f96974b) do not run as documented",
  b6bbd53a0e36: TEMPLATE_ONLY,
  d1a1e18dc03a: TEMPLATE_ONLY,
  "96dd90fd19d7": TEMPLATE_ONLY,
  "392fc09abefb": TEMPLATE_ONLY,
  e50bdfe02b85: "a `<context_management>` fragment",
  "0494325631cf": "a `<context_management>` fragment",
  ee1ebcd13ee2: "a `<context_management>` fragment",
  f5b22f9d381b: "a `<context_management>` fragment",
  "16888fb9681b": "a `<file_paths>` fragment",
  "9a7a17549fff": "a `<file_paths>` fragment",
  ae4a018afa08: "`<file_paths>` fragments",
  ca3b32406928: "a `<file_paths>` fragment",
  "8c02b7d4b704": "a `<file_paths>` fragment",
  "983019a89bb6": "a `<file_paths>` fragment",
  e09fb8d863d8: "an `<output_format>` fragment",
  "32f947c95871": "a `<script_execution>` fragment",
  "6282f5fe0d3f": "a `<description>` fragment with an inline call",
};

/** How a non-executing example is refused at run time: the reason, a part of the message, and inputs to submit. */
export interface Refusal {
  reason: "not_supported" | "input_validation_failure";
  message: string;
  inputs?: Readonly<Record<string, unknown>>;
}

const NO_DESCRIPTION: Refusal = { reason: "input_validation_failure", message: "has no <description> or <instructions>" };
const NO_COMMAND: Refusal = { reason: "input_validation_failure", message: "a script task needs a <command>" };
const unknownTemplate = (name: string): Refusal => ({ reason: "input_validation_failure", message: `unknown template '${name}'` });

/**
 * Examples that do not execute end to end but are refused at run time in a stable way; the integration test checks
 * the reason (the table's claim) for each.
 */
export const REFUSED: Readonly<Record<string, Refusal>> = {
  "3420604979f1": { reason: "not_supported", message: '<task type="reparse">' },
  "584adbd0e116": { reason: "not_supported", message: '<task type="associative_memory">' },
  d321a2f05774: { reason: "not_supported", message: '<task type="map">' },
  "7ff9a6a21b40": { reason: "not_supported", message: '<task type="composite">' },
  "04aa368d28b4": { reason: "not_supported", message: '<task type="function">' },
  "996bc568ce48": { reason: "not_supported", message: '<task type="director-evaluator">' },
  a260d6351e86: { reason: "input_validation_failure", message: "director_evaluator_loop requires a <director>" },
  fc1d15cc2446: NO_DESCRIPTION,
  f3123cdf42f7: NO_DESCRIPTION,
  "3fb9c09a413d": NO_DESCRIPTION,
  "90443609d032": NO_DESCRIPTION,
  b9b569a831d1: NO_DESCRIPTION,
  "8a0ed3fa5900": NO_DESCRIPTION,
  "3bc075029304": NO_COMMAND,
  "79e1bf7ff43e": NO_COMMAND,
  "79716b0f1827": NO_COMMAND,
  "715028df6d14": NO_COMMAND,
  b633f13fc82b: { reason: "input_validation_failure", message: "step 2/3 failed: missing required input: 'previous_step'" },
  "246e0891885e": { reason: "input_validation_failure", message: "step 2/3 failed: missing required input: 'last_director_output'" },
  eada2887e0b8: { reason: "input_validation_failure", message: "missing required input: 'env:data_source'" },
  af4c5de7c07f: unknownTemplate("get_file_info"),
  "38806f96974b": unknownTemplate("get_file_info"),
  be2ceb76f1c5: unknownTemplate("process_data"),
  "9fce86f3a7b0": unknownTemplate("process_data"),
  "91f1ebe0f2ca": unknownTemplate("validate_input"),
  a5d762e91af7: unknownTemplate("validate_input"),
};

/** Skeletons whose body is a comment: they complete without asking the model. */
export const EMPTY: readonly string[] = ["7633fff735bb", "d9f1f3e40fca", "6bbf3c82f4f3", "fd963a5f1643"];

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
