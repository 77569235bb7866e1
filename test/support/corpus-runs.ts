/**
 * The seeds-xml examples that execute end to end through the real pipeline, with which inputs and what each shows (the
 * docs table's claim). Part of test/support/corpus.ts, which re-exports it; test/integration/corpus-run.test.ts runs them.
 */

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
  {
    id: "eada2887e0b8",
    inputs: {},
    shows: '`from="env:data_source"`: an allowlisted variable of the Evaluator\'s environment (`DIRIGENT_ENV_INPUTS=data_source`)',
  },
  // Associative memory tasks.
  {
    id: "584adbd0e116",
    inputs: {},
    shows:
      "an `associative_memory` task: Memory matches `<query>`, at most `<max_results>` files scoring `<relevance_threshold>` or more, as `{context, matches}`",
  },
  {
    id: "bb3be6c47bfa",
    inputs: { query: "authentication and login" },
    shows:
      "an atomic task of subtype `associative_matching`: Memory matches its prompt and `query` input (no model session), answering `{context, matches}`",
  },
  // Map tasks.
  {
    id: "d321a2f05774",
    inputs: {},
    shows: "a map: its two steps run at once (`branch n/2` events), their results in step order",
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
    id: "af4c5de7c07f",
    with: ["8fafe594bcb5"],
    inputs: {},
    shows: "`result[0]`: the first entry of the previous step's JSON list reaches the `<call>` of `get_file_info` (8fafe594bcb5)",
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
