/**
 * Why the other seeds-xml examples do not execute end to end, and how those refused at run time are refused. Part of
 * test/support/corpus.ts, which re-exports it; test/integration/corpus-run.test.ts checks the refusals.
 */

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
  "7ff9a6a21b40":
    "`composite` task type: `not_supported` (the `<task ref>` inside it names `load_csv` of the `<library>` element beside it, which is not a template library)",
  "04aa368d28b4": "`function` task type (`<body>`, `<step>`): `not_supported`",
  "00f0c4d55772":
    "the documented failure, found at submission: a template without parameters does not see the caller's `user_name` (`INVALID_TEMPLATE` at 3:3)",
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
  "38806f96974b":
    "its first step is `<code>`: refused with `not_supported` (dirigent runs no code written in a template; a script task can run the listing); the `step_results[0].parsedContent[0]` form of its second snippet is what af4c5de7c07f runs",
  be2ceb76f1c5:
    "its first step is `<code>`: refused with `not_supported` (dirigent runs no code written in a template); it calls `process_data`, defined nowhere in the corpus",
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
    "its point is `<context_relevance>` (read by associative memory tasks; an atomic task ignores it) and `<context_assembly>` (ignored with a parse warning); it runs as a plain atomic task",
  b9b569a831d1: `\`assoc_match\` subtype with \`<param>\`/\`<return>\` inputs; the task ${NO_PROMPT}`,
  "8a0ed3fa5900": `only \`<context_management>\`, so the task ${NO_PROMPT}`,
  "258a2770a28c": AIDER,
  a7adbbf9a259: AIDER,
  a78ecb3b48bc: AIDER,
  "6c5c1ec0cee5": AIDER,
  "68b17d387177": AIDER,
  // Definitions and fragments.
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
const code = (line: number, col: number): Refusal => ({
  reason: "not_supported",
  message: `inline <code> at line ${line}, column ${col} is not run`,
});
const unknownTemplate = (name: string): Refusal => ({ reason: "input_validation_failure", message: `unknown template '${name}'` });

/**
 * Examples that do not execute end to end but are refused at run time in a stable way; the integration test checks
 * the reason (the table's claim) for each.
 */
export const REFUSED: Readonly<Record<string, Refusal>> = {
  "3420604979f1": { reason: "not_supported", message: '<task type="reparse">' },
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
  "38806f96974b": code(7, 7),
  be2ceb76f1c5: code(6, 7),
  "9fce86f3a7b0": unknownTemplate("process_data"),
  "91f1ebe0f2ca": unknownTemplate("validate_input"),
  a5d762e91af7: unknownTemplate("validate_input"),
};

/** Skeletons whose body is a comment: they complete without asking the model. */
export const EMPTY: readonly string[] = ["7633fff735bb", "d9f1f3e40fca", "6bbf3c82f4f3", "fd963a5f1643"];
