/**
 * Fuzzing the decoders: every message schema of protocol/index.ts, and the submission decoder of the intake, take
 * thousands of hostile bodies and return a result, never throw (a stack overflow on deep nesting included), and
 * never pollute a prototype.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as protocol from "../../../protocol/index.js";
import { decode, decodeJson, MAX_JSON_DEPTH, SubmitRequest, validate } from "../../../protocol/index.js";
import { decodeSubmission } from "../../../actors/director/intake.js";
import { deepJson, hostileCases, hostileSeed, prng, withRaw, type HostileCase } from "../../support/hostile.js";

const seed = hostileSeed();
console.log(`hostile decoder fuzz: seed ${seed} (HOSTILE_SEED=${seed} reproduces it)`);

const schemas: Array<[string, z.ZodType]> = Object.entries(protocol as Record<string, unknown>).flatMap(([name, value]) =>
  value instanceof z.ZodType ? [[name, value] as [string, z.ZodType]] : [],
);
const bytes = (text: string) => new TextEncoder().encode(text);

/** Names and descriptors of the built-in prototypes, to compare before and after. */
function prototypes(): string {
  const of = (proto: object) =>
    Object.getOwnPropertyNames(proto)
      .sort()
      .map((name) => `${name}:${typeof Object.getOwnPropertyDescriptor(proto, name)?.value}`)
      .join(",");
  return [Object.prototype, Array.prototype, Function.prototype, String.prototype].map(of).join("|");
}

/** A well-formed-looking body for any schema, for the cases to mutate. */
const sample: Record<string, unknown> = {
  type: "evaluator.evaluate",
  taskId: "fuzz-1",
  xml: "<task><description>hi {{topic}}</description></task>",
  inputs: { topic: "cats" },
  prompt: "hello",
  data: { a: 1 },
};

function expectResult(name: string, hostile: HostileCase, run: () => unknown): void {
  let out: unknown;
  try {
    out = run();
  } catch (err) {
    throw new Error(`${name} threw on a '${hostile.kind}' body (seed ${seed}): ${String(err)}`);
  }
  expect(out, `${name}: '${hostile.kind}'`).toMatchObject({ ok: expect.any(Boolean) });
}

describe("hostile bodies through the decoders", () => {
  it(`lists the protocol schemas (${schemas.length})`, () => {
    expect(schemas.map(([name]) => name)).toEqual(
      expect.arrayContaining([
        "SubmitRequest",
        "EvaluateRequest",
        "ExecuteRequest",
        "ScriptRequest",
        "MatchRequest",
        "CompileRequest",
        "GoalSubmitRequest",
        "UserInput",
        "TaskRecord",
      ]),
    );
  });

  it("every schema returns a result for every hostile body, and no prototype is polluted", () => {
    const rand = prng(seed);
    const before = prototypes();
    const cases = hostileCases(rand, sample, 40);
    // A body of 900 KB through the request schemas only: slow, and the same code path for every schema.
    const huge = hostileCases(rand, sample, 0, { huge: 1 });
    const requests = new Set([
      "SubmitRequest",
      "EvaluateRequest",
      "ExecuteRequest",
      "ScriptRequest",
      "MatchRequest",
      "CompileRequest",
      "GoalSubmitRequest",
      "UserInput",
    ]);
    for (const [name, schema] of schemas) {
      for (const hostile of requests.has(name) ? [...cases, ...huge] : cases) {
        expectResult(name, hostile, () => decode(schema, hostile.body));
        const json = decodeJson(hostile.body);
        // The parsed value straight to zod too: deep values the depth check would refuse reach the schema here.
        if (json.ok) expectResult(`${name} (validate)`, hostile, () => validate(schema, json.value));
      }
    }
    for (const hostile of [...cases, ...huge]) expectResult("decodeSubmission", hostile, () => decodeSubmission(hostile.body));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).toString).toBe(Object.prototype.toString);
    expect(prototypes()).toBe(before);
  });

  it("validates a value 3,000 and 100,000 levels deep without throwing", () => {
    for (const depth of [3000, 100_000]) {
      let deep: unknown = "bottom";
      for (let i = 0; i < depth; i++) deep = i % 2 === 0 ? [deep] : { a: deep };
      const value = { ...sample, inputs: { topic: deep }, data: { deep } };
      for (const [name, schema] of schemas) expect(() => validate(schema, value), name).not.toThrow();
      expect(validate(SubmitRequest, { xml: "<task><description>x</description></task>", inputs: { deep } }).ok).toBe(true);
    }
  });

  it("refuses JSON nested deeper than the limit before parsing it, and takes nesting inside strings for text", () => {
    const deep = decodeJson(bytes(withRaw({ xml: "<task/>" }, "inputs", `{"a":${deepJson(3000)}}`)));
    expect(deep.ok).toBe(false);
    if (!deep.ok) expect(deep.error.message).toMatch(new RegExp(`more than ${MAX_JSON_DEPTH} levels`));
    const shallow = decodeJson(bytes(deepJson(MAX_JSON_DEPTH)));
    expect(shallow.ok).toBe(true);
    const inString = decodeJson(bytes(JSON.stringify({ text: "[".repeat(5000) + '\\"{'.repeat(100) })));
    expect(inString.ok).toBe(true);
    const submitted = decodeSubmission(
      bytes(withRaw({ xml: "<task><description>x</description></task>" }, "inputs", `{"a":${deepJson(3000)}}`)),
    );
    expect(submitted).toMatchObject({
      ok: false,
      reply: { error: { code: "INVALID_MESSAGE", message: expect.stringMatching(/levels deep/) } },
    });
  });

  it("a schema that throws while validating is a refusal, not an exception", () => {
    const throwing = {
      get xml(): string {
        throw new RangeError("Maximum call stack size exceeded");
      },
    };
    const out = validate(SubmitRequest, throwing);
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.error.message).toMatch(/could not be validated: Maximum call stack/);
  });

  it.each(["__proto__", "constructor", "prototype"])("keeps a %s key in inputs from reaching any prototype", (key) => {
    const before = prototypes();
    const body = `{"xml":"<task><description>{{topic}}</description></task>","inputs":{${JSON.stringify(key)}:{"polluted":"yes","topic":"EVIL"},"nested":{${JSON.stringify(key)}:{"polluted":"yes"}}}}`;
    const decoded = decodeSubmission(bytes(body));
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    const { inputs } = decoded.submission;
    expect(Object.getPrototypeOf(inputs)).toBe(Object.prototype);
    expect((inputs as Record<string, unknown>).polluted).toBeUndefined();
    expect((inputs as Record<string, unknown>).topic).toBeUndefined();
    const nested = inputs.nested as Record<string, unknown>;
    expect(Object.getPrototypeOf(nested)).toBe(Object.prototype);
    expect(nested.polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(prototypes()).toBe(before);
  });
});
