/** Strict and lenient `{{var}}` substitution (docs/design.md, C13) in the Evaluator's prompt and argument paths, and its config key. */
import { describe, expect, it } from "vitest";
import { expandText } from "../../../actors/evaluator/inline.js";
import { prepareAtomic } from "../../../actors/evaluator/nodes.js";
import { argumentValue } from "../../../actors/evaluator/walk.js";
import { parseTemplate } from "../../../machines/language/parse.js";
import { rootEnv } from "../../../machines/language/env.js";
import type { TaskResult } from "../../../protocol/index.js";
import { ConfigError, loadConfig } from "../../../runtime/config.js";
import type { TaskNode } from "../../../machines/language/ast.js";

const env = rootEnv({ topic: "tides", user: { name: "Ada" } });
const calls: string[] = [];
const call = async (c: { template: string }): Promise<TaskResult> => {
  calls.push(c.template);
  return { content: `out-of-${c.template}`, status: "COMPLETE", notes: {} };
};

function task(xml: string): TaskNode {
  const parsed = parseTemplate(xml);
  if (!parsed.ok || parsed.document.entry?.kind !== "task") throw new Error("expected a task");
  return parsed.document.entry;
}

const NODE = task(`<task>
  <description>Write about {{topic}} for {{audience}}; {{shout(topic)}}</description>
  <system>You write for {{user.name}} and {{user.team}}.</system>
</task>`);

describe("expandText", () => {
  it("strict: collects every unbound variable", async () => {
    expect(await expandText("{{topic}} {{a}} {{b.c}} {{a}}", env, call)).toEqual({ ok: false, missing: ["a", "b.c"] });
    expect(await expandText("{{topic}} {{a}}", env, call, "strict")).toEqual({ ok: false, missing: ["a"] });
  });

  it("lenient: inserts {{undefined:name}} for each unbound variable and still runs inline calls", async () => {
    calls.length = 0;
    expect(await expandText("{{topic}} {{a}} {{ b.c }} {{f(topic)}} {x}", env, call, "lenient")).toEqual({
      ok: true,
      text: "tides {{undefined:a}} {{undefined:b.c}} out-of-f {x}",
    });
    expect(calls).toEqual(["f"]);
  });

  it("lenient: a marker already in the text is left as it is", async () => {
    expect(await expandText("{{undefined:a}} {{topic}}", env, call, "lenient")).toEqual({ ok: true, text: "{{undefined:a}} tides" });
  });
});

describe("prepareAtomic", () => {
  it("strict (the default): fails with input_validation_failure naming every unbound variable", async () => {
    const prepared = await prepareAtomic(NODE, env, call);
    expect(prepared.ok).toBe(false);
    if (prepared.ok) return;
    expect(prepared.result.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "input_validation_failure",
      message: "missing required input: 'audience', 'user.team'",
      details: { missing: ["audience", "user.team"] },
    });
  });

  it("lenient: substitutes what is bound and marks the rest, in every prompt field", async () => {
    const prepared = await prepareAtomic(NODE, env, call, "lenient");
    expect(prepared).toEqual({
      ok: true,
      fields: {
        prompt: "Write about tides for {{undefined:audience}}; out-of-shout",
        system: "You write for Ada and {{undefined:user.team}}.",
      },
    });
  });
});

describe("argumentValue", () => {
  it("substitutes {{…}} in an argument strictly or leniently", () => {
    expect(argumentValue("about {{topic}} and {{nope}}", env)).toEqual({ missing: ["nope"] });
    expect(argumentValue("about {{topic}} and {{nope}}", env, "lenient")).toEqual({ value: "about tides and {{undefined:nope}}" });
    expect(argumentValue("topic", env, "lenient")).toEqual({ value: "tides" });
  });
});

describe("the substitution config key", () => {
  it("defaults to strict and is set by DIRIGENT_SUBSTITUTION or --substitution (the flag wins)", () => {
    expect(loadConfig({}, {}).substitution).toBe("strict");
    expect(loadConfig({}, { DIRIGENT_SUBSTITUTION: "lenient" }).substitution).toBe("lenient");
    expect(loadConfig({ substitution: "strict" }, { DIRIGENT_SUBSTITUTION: "lenient" }).substitution).toBe("strict");
  });

  it("refuses other values, naming the source", () => {
    expect(() => loadConfig({}, { DIRIGENT_SUBSTITUTION: "loose" })).toThrow(ConfigError);
    expect(() => loadConfig({}, { DIRIGENT_SUBSTITUTION: "loose" })).toThrow(/environment variable DIRIGENT_SUBSTITUTION: .*got 'loose'/);
    expect(() => loadConfig({ substitution: "x" }, {})).toThrow(/flag --substitution/);
  });
});
