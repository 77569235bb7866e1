/**
 * Two systems in one process (two Directors, Evaluators and Handlers on two in-process transports, each with its own
 * mock model) run tasks at the same time without crossing: each role instance owns what its effects act for.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import type { TaskEvent } from "../../protocol/index.js";

const XML = `<template name="shout" params="text"><task><description>SHOUT {{text}}</description></task></template>
<task type="sequential">
  <steps>
    <task><description>first {{tag}} {{maybe}}</description></task>
    <call template="shout"><arg>second {{tag}}</arg></call>
  </steps>
</task>`;

let strict: Stack;
let lenient: Stack;

beforeAll(async () => {
  // Told apart by configuration: the Evaluator's substitution mode and the Handler's system prompt.
  strict = await startStack({ config: { substitution: "strict", baseSystemPrompt: "system S" } });
  lenient = await startStack({ config: { substitution: "lenient", baseSystemPrompt: "system L" } });
});

afterAll(async () => {
  await strict?.stop();
  await lenient?.stop();
});

const userTexts = (stack: Stack) =>
  stack.mock.requests.map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));
const systemTexts = (stack: Stack) =>
  stack.mock.requests.map((r) => String(r.body.messages.find((m) => m["role"] === "system")?.["content"] ?? ""));

describe("two systems in one process", () => {
  it("run concurrent tasks each with its own Evaluator, Handler and model", async () => {
    const runs = Array.from({ length: 6 }, (_, i) => i).flatMap((i) => {
      const run = (stack: Stack, tag: string, inputs: Record<string, unknown>) => {
        const events: TaskEvent[] = [];
        const taskId = newTaskId();
        return stack.client
          .run({ xml: XML, inputs: { tag, ...inputs }, taskId }, (e) => events.push(e))
          .then(
            (outcome) => ({ stack, tag, taskId, outcome, events }),
            (error: unknown) => ({ stack, tag, taskId, error, events }),
          );
      };
      // Strict tasks get `maybe` (strict refuses the submission without it); lenient tasks do not, so their prompts show the marker.
      return [run(strict, `S${i}`, { maybe: "given" }), run(lenient, `L${i}`, {}), run(strict, `S${i}x`, {})];
    });
    const done = await Promise.all(runs);
    for (const ran of done) {
      const { tag, taskId, events } = ran;
      if (tag.endsWith("x")) {
        expect("error" in ran && ran.error).toMatchObject({ code: "INVALID_TEMPLATE", message: expect.stringContaining("{{maybe}}") });
        expect(events).toEqual([]);
      } else {
        expect("outcome" in ran && ran.outcome).toMatchObject({ status: "COMPLETE", content: `mock: SHOUT second ${tag}` });
      }
      expect(events.every((e) => !("taskId" in e) || e.taskId === taskId)).toBe(true);
    }
    // Each model was asked only by its own system's Handler, with its own system prompt and substitution.
    expect(userTexts(strict).sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => [`first S${i} given`, `SHOUT second S${i}`])
        .flat()
        .sort(),
    );
    expect(userTexts(lenient).sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => [`first L${i} {{undefined:maybe}}`, `SHOUT second L${i}`])
        .flat()
        .sort(),
    );
    expect(systemTexts(strict).every((s) => s.startsWith("system S"))).toBe(true);
    expect(systemTexts(lenient).every((s) => s.startsWith("system L"))).toBe(true);
  });
});
