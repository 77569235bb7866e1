/**
 * The continuation effects' template choice (actors/evaluator/continuation.ts): a subtask's template by hint, by
 * matching its description (at least {@link MIN_SUBTASK_SCORE}) or generated; an evaluation's template by criteria
 * from the library; and the settings an evaluation child runs with (hoidn's seed 000: `inherit_context=subset`,
 * `accumulate_data=true`). The library is built from real template text; no network.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createActor, toPromise } from "xstate";
import { START } from "../../machines/invoke-events.js";
import {
  chooseEvaluationTemplate,
  chooseSubtaskTemplate,
  MIN_SUBTASK_SCORE,
  provideContinuation,
} from "../../actors/evaluator/continuation.js";
import { libraryFromXml } from "../../actors/library/library.js";
import { CONTEXT_OVERRIDE_BINDING } from "../../machines/evaluator/context-defaults.js";
import { find, rootEnv, type Env } from "../../machines/language/env.js";
import type { SessionState, TaskResult } from "../../protocol/index.js";

const library = libraryFromXml([
  {
    file: "cities.xml",
    xml: `<task name="list_cities" type="atomic" subtype="subtask"><description>list european capital cities</description></task>`,
  },
  { file: "sums.xml", xml: `<task name="add_numbers" type="atomic"><description>add two numbers together carefully</description></task>` },
]).library;

describe("chooseSubtaskTemplate", () => {
  it("chooses the library template whose description matches the request's", () => {
    const chosen = chooseSubtaskTemplate(library, { type: "atomic", description: "list capital cities" });
    expect(chosen).toMatchObject({ name: "list_cities", source: "library" });
  });

  it("keeps a match scoring exactly the threshold, and generates an atomic task below it", () => {
    // list_cities has the words list, european, capital, cities: "visit cities" shares 1 of 5 words, "visit old cities" 1 of 6.
    expect(library.match("visit cities", { type: "atomic", limit: 1 })[0]?.score).toBeCloseTo(MIN_SUBTASK_SCORE, 10);
    expect(chooseSubtaskTemplate(library, { type: "atomic", description: "visit cities" })).toMatchObject({
      name: "list_cities",
      source: "library",
    });
    expect(library.match("visit old cities", { type: "atomic", limit: 1 })[0]?.score).toBeLessThan(MIN_SUBTASK_SCORE);
    expect(chooseSubtaskTemplate(library, { type: "atomic", description: "visit old cities" })).toMatchObject({
      name: "generated:atomic:subtask",
      source: "generated",
    });
  });

  it("prefers the request's subtype, and a hinted name over any match", () => {
    expect(
      chooseSubtaskTemplate(library, { type: "atomic", subtype: "subtask", description: "add european capital cities" }),
    ).toMatchObject({ name: "list_cities" });
    expect(
      chooseSubtaskTemplate(library, { type: "atomic", description: "list capital cities", template_hints: ["add_numbers"] }),
    ).toMatchObject({ name: "add_numbers" });
  });
});

describe("chooseEvaluationTemplate", () => {
  it("matches the starter templates' <criteria>, and falls back to the built-in evaluator", async () => {
    const dir = join(import.meta.dirname, "../../templates");
    const files = ["evaluate-output.xml", "run-tests-evaluation.xml", "summarize.xml", "subtask-generic.xml"];
    const starter = libraryFromXml(
      await Promise.all(files.map(async (file) => ({ file, xml: await readFile(join(dir, file), "utf8") }))),
    ).library;
    expect(starter.get("run-tests-evaluation")?.criteria).toContain("failing tests");
    expect(chooseEvaluationTemplate(starter, "- tests pass\n- no failing tests")).toMatchObject({
      name: "run-tests-evaluation",
      source: "library",
    });
    expect(chooseEvaluationTemplate(starter, "the answer is correct and complete")).toMatchObject({
      name: "evaluate-output",
      source: "library",
    });
    expect(chooseEvaluationTemplate(starter, "a haiku about rain")).toMatchObject({ name: "builtin:evaluator", source: "generated" });
  });
});

describe("dynamic evaluation", () => {
  it("runs the evaluation with inherit_context=subset and accumulate_data=true, and binds last_evaluator_output", async () => {
    const envs: Env[] = [];
    const session = { toolCallId: "c1" } as unknown as SessionState;
    const machine = provideContinuation(
      {
        library,
        evaluateDocument: async (_document, env) => (envs.push(env), { content: '{"success": true}', status: "COMPLETE", notes: {} }),
        script: async () => ({ exitCode: 0, timedOut: false, stdout: "", stderr: "" }),
        waitForInput: async () => "",
        resume: async (): Promise<TaskResult> => ({ content: "done", status: "COMPLETE", notes: {} }),
        progress: () => undefined,
      },
      (_, result) => result,
    );
    const result = {
      content: "draft",
      status: "CONTINUATION" as const,
      notes: { evaluation_request: { type: "llm", criteria: "good" } },
      session,
    };
    const actor = createActor(machine, { input: { path: "0", env: rootEnv(), result, maxDepth: 5, maxEvaluations: 5 } });
    const done = toPromise(actor);
    actor.start().send(START);
    const output = await done;
    expect(output).toMatchObject({
      status: "COMPLETE",
      content: "done",
      notes: { evaluations: 1, last_evaluator_output: '{"success": true}' },
    });
    expect(envs).toHaveLength(1);
    expect(find(envs[0]!, CONTEXT_OVERRIDE_BINDING)).toEqual({ found: true, value: { inheritContext: "subset", accumulateData: true } });
    expect(find(envs[0]!, "director_output")).toEqual({ found: true, value: "draft" });
  });
});
