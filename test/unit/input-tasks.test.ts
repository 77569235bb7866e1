/**
 * A task's nested input tasks (actors/evaluator/bind.ts) run at once on one abort signal of their own: a task with
 * more than ten of them binds them all with no listener warning from Node, and the first failure stops the others.
 */
import { describe, expect, it } from "vitest";
import { bindInputs } from "../../actors/evaluator/bind.js";
import { rootEnv } from "../../machines/language/env.js";
import { parseTemplate } from "../../machines/language/parse.js";
import type { TaskNode } from "../../machines/language/ast.js";

function taskWithInputs(count: number): TaskNode {
  const inputs = Array.from(
    { length: count },
    (_, i) => `<input name="in${i}"><task><description>Input ${i}.</description></task></input>`,
  ).join("");
  const parsed = parseTemplate(`<task><description>Use them.</description><inputs>${inputs}</inputs></task>`);
  if (!parsed.ok || parsed.document.entry?.kind !== "task") throw new Error("template did not parse");
  return parsed.document.entry;
}

describe("nested input tasks", () => {
  it("binds twenty of them at once with no listener warning from Node", async () => {
    const warnings: string[] = [];
    const warned = (w: Error) => warnings.push(w.name);
    process.on("warning", warned);
    let listening = 0;
    const outcome = await bindInputs(
      async (path, _env, signal) => {
        signal?.addEventListener("abort", () => undefined, { once: true });
        listening++;
        // Every input has started (and listens) before any answers.
        await new Promise((r) => setImmediate(r));
        return { content: `value of ${path}`, status: "COMPLETE", notes: {} };
      },
      taskWithInputs(20),
      "0",
      rootEnv(),
      false,
    );
    // Node emits its warning on the next tick after the listener that passed the limit.
    await new Promise((r) => setImmediate(r));
    process.off("warning", warned);
    expect(listening).toBe(20);
    expect(warnings).toEqual([]);
    expect("env" in outcome).toBe(true);
  });

  it("stops the inputs still running when one fails, and that failure is the outcome", async () => {
    const stopped: string[] = [];
    const outcome = await bindInputs(
      (path, _env, signal) => {
        if (path === "0.inputs.3.task") return Promise.resolve({ content: "input 3 broke", status: "FAILED" as const, notes: {} });
        // The others run until stopped, then answer as stopped.
        return new Promise((resolve) =>
          signal?.addEventListener(
            "abort",
            () => {
              stopped.push(path);
              resolve({ content: "stopped", status: "FAILED" as const, notes: {} });
            },
            { once: true },
          ),
        );
      },
      taskWithInputs(5),
      "0",
      rootEnv(),
      false,
    );
    expect(stopped.sort()).toEqual(["0.inputs.0.task", "0.inputs.1.task", "0.inputs.2.task", "0.inputs.4.task"]);
    expect(outcome).toMatchObject({ result: { status: "FAILED", content: "input 3 broke" } });
  });
});
