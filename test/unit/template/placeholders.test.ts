/**
 * The submission check of `{{name}}` placeholders (actors/director/placeholders.ts): a placeholder nothing can fill
 * where it stands is found, at the line and column of the element holding it; names the language binds there (inputs
 * of the task or a task around it, a sequential's step results, a map's item, a reduce's accumulator, a loop's
 * feedback, a template's parameters) are allowed. Every corpus example that runs passes the check with its inputs.
 */
import { describe, expect, it } from "vitest";
import { unfillablePlaceholder } from "../../../actors/director/placeholders.js";
import { parseTemplate } from "../../../machines/language/parse.js";
import { corpusIndex, corpusText, RUNS } from "../../support/corpus.js";

function check(xml: string, inputs: Record<string, unknown> = {}) {
  const parsed = parseTemplate(xml);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return unfillablePlaceholder(parsed.document, inputs);
}

const task = (description: string, extra = "") => `<task>${extra}<description>${description}</description></task>`;
const sequential = (...steps: string[]) => `<task type="sequential"><steps>${steps.join("")}</steps></task>`;

describe("placeholders a submission may use", () => {
  it.each([
    ["a submitted input", task("{{topic}}"), { topic: "x" }],
    ["an <input> of the task, with a path into it", task("{{who.name}}", '<inputs><input name="who">{"name":"Ada"}</input></inputs>'), {}],
    ["a reserved name", task("{{$budgets}}"), {}],
    ["an inline call and brace text that is no variable", task('{{f(x, "y")}} {{ not a path }} {{undefined:x}}'), {}],
    ["the value of <input_source>", task("{{input}}", "<input_source>topic</input_source>"), { topic: "x" }],
    [
      "what a sequential binds for its steps",
      sequential(
        task("{{topic}}", "<output_slot>draft</output_slot>"),
        task("{{previous_result}} {{step_results[0].content}} {{result}} {{history}} {{draft}} {{last_evaluator_output}}"),
      ),
      { topic: "x" },
    ],
    [
      "the inputs of a task around the step",
      `<task type="sequential"><inputs><input name="tone">dry</input></inputs><steps>${sequential(task("{{tone}}"))}</steps></task>`,
      {},
    ],
    [
      "a map's element and its index",
      `<task type="map" over="files" as="f"><steps>${task("{{f}} {{f_index}}")}</steps></task>`,
      { files: [] },
    ],
    ["a map's item by default", `<task type="map" over="files"><steps>${task("{{item}} {{item_index}}")}</steps></task>`, { files: [] }],
    [
      "what a reduce binds for its inner and reduction tasks",
      `<task type="reduce"><inputs><input name="a">1</input></inputs>
        <inner_task><description>{{current_input}} {{input_name}} {{input_index}} {{accumulator}}</description></inner_task>
        <reduction_task><description>{{current_result}} {{accumulator}} {{original_input}}</description></reduction_task></task>`,
      {},
    ],
    [
      "what a loop binds for its director, script and evaluator",
      `<task type="director_evaluator_loop"><inputs><input name="goal">x</input></inputs>
        <director><description>{{goal}} {{evaluation_feedback}} {{current_iteration}}</description></director>
        <script_execution><command>python3 -c "{{code}}" {{script_input}}</command><inputs><input name="code" from="director_result"/></inputs></script_execution>
        <evaluator><description>{{director_result}} {{script_output}} {{script_exit_code}}</description></evaluator></task>`,
      {},
    ],
    [
      "a template's parameters in its body, and a call's arguments in the caller's scope",
      `<template name="greet" params="name"><task><description>Hello {{name}}</description></task></template>
       <call template="greet"><arg>"{{who}}"</arg></call>`,
      { who: "Ada" },
    ],
    [
      "a function-style task's parameters",
      `<task name="f" parameters="text">${"<description>{{text}}</description>"}</task>${task("hi")}`,
      {},
    ],
    [
      "a script's command and environment",
      `<task type="script"><inputs><input name="w" from="word"/></inputs><command>echo {{w}}</command><environment><var name="X">{{w}}</var></environment></task>`,
      { word: "x" },
    ],
    ["the text of a library ref task, which is not run", '<task ref="lib"><description>{{anything}}</description></task>', {}],
    ["the text of a task type the runtime does not run", '<task type="parallel"><description>{{anything}}</description></task>', {}],
  ])("%s", (_, xml, inputs) => {
    expect(check(xml, inputs)).toBeUndefined();
  });
});

describe("placeholders nothing can fill", () => {
  it("in a step of a sequential: at the step's task, with the nearest name", () => {
    const found = check(`<task type="sequential">\n<steps>\n  <task><description>{{topik}}</description></task></steps></task>`, {
      topic: "x",
    });
    expect(found).toMatchObject({ line: 3, col: 3 });
    expect(found?.message).toMatch(
      /^\{\{topik\}\} in <description> can never be filled: no input 'topik' is submitted or bound by an <input> of the task or of a task around it.*; did you mean 'topic'\?/,
    );
  });

  it("in a template's body: only its parameters are visible", () => {
    const found = check(
      `<template name="old">\n  <task><description>Hello, {{user_name}}!</description></task>\n</template>\n<call template="old"/>`,
      {
        user_name: "Alice",
      },
    );
    expect(found).toMatchObject({ line: 2, col: 3 });
    expect(found?.message).toContain("the body of template 'old' sees only its parameters (none)");
  });

  it.each([
    [
      "a reduce's own inputs in its inner task (they are its items)",
      `<task type="reduce"><inputs><input name="monday">x</input></inputs><inner_task><description>{{monday}}</description></inner_task><reduction_task><description>{{current_result}}</description></reduction_task></task>`,
      "monday",
    ],
    [
      "the inner task's result before the reduction",
      `<task type="reduce"><inner_task><description>{{current_result}}</description></inner_task><reduction_task><description>r</description></reduction_task></task>`,
      "current_result",
    ],
    [
      "a sibling input in a nested input task (inputs are bound after it runs)",
      `<task><inputs><input name="a">1</input><input name="b">${task("{{a}}")}</input></inputs><description>d</description></task>`,
      "a",
    ],
    ["a map's item under another name", `<task type="map" over="files" as="path"><steps>${task("{{item}}")}</steps></task>`, "item"],
    ["a script's command", `<task type="script"><command>echo {{word}}</command></task>`, "word"],
    [
      "a script's environment",
      `<task type="script"><command>env</command><environment><var name="X">{{word}}</var></environment></task>`,
      "word",
    ],
    [
      "a call's argument",
      `<template name="f" params="x">${task("{{x}}")}</template><call template="f"><arg>"{{nope}}"</arg></call>`,
      "nope",
    ],
    ["a <file_paths> path", task("d", "<file_paths><path>{{doc}}</path></file_paths>"), "doc"],
    ["a <model>", task("d", "<model>{{who}}</model>"), "who"],
    ["<criteria>", task("d", "<criteria>{{bar}}</criteria>"), "bar"],
    [
      "a loop's director",
      `<task type="director_evaluator_loop"><director><description>{{goal}}</description></director><evaluator><description>e</description></evaluator></task>`,
      "goal",
    ],
    ["a judge_loop's task", `<task type="judge_loop"><description>{{topic}}</description></task>`, "topic"],
    ["a memory task's query", `<task type="associative_memory"><query>{{module}}</query></task>`, "module"],
    ["a step of a cond's case", `<cond><case test="true">${task("{{summary}}")}</case></cond>`, "summary"],
  ])("in %s", (_, xml, name) => {
    expect(check(xml)?.message).toContain(`{{${name}}} in <`);
  });
});

describe("the corpus", () => {
  it("every example that runs passes the check with its inputs; only the Aider ones (no task_description) and the documented failure of a template without parameters are refused", () => {
    const refused: string[] = [];
    for (const entry of corpusIndex()) {
      const run = RUNS.find((r) => r.id === entry.id);
      const parsed = parseTemplate([...(run?.with ?? []).map((id) => corpusText(id)), corpusText(entry.file)].join("\n"));
      if (!parsed.ok) continue;
      const found = unfillablePlaceholder(parsed.document, run?.inputs ?? {});
      if (found) refused.push(`${entry.id}: ${found.message.slice(0, 40)}`);
    }
    expect(refused.sort()).toEqual([
      expect.stringMatching(/^00f0c4d55772: \{\{user_name\}\}/),
      ...["258a2770a28c", "68b17d387177", "6c5c1ec0cee5", "a78ecb3b48bc", "a7adbbf9a259"].map((id) =>
        expect.stringMatching(new RegExp(`^${id}: \\{\\{task_description\\}\\}`)),
      ),
    ]);
  });
});
