import { describe, expect, it } from "vitest";
import { decode, encode, MAX_BODY_BYTES, SubmitRequest, TaskEvent, TaskOutcome, TaskResult } from "../../../protocol/index.js";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("codec", () => {
  it("round-trips a result", () => {
    const value = { content: "hi", status: "COMPLETE" as const, notes: { usage: { promptTokens: 1, completionTokens: 2 } } };
    const back = decode(TaskResult, encode(TaskResult, value));
    expect(back).toEqual({ ok: true, value });
  });

  it("names every schema problem with a JSON pointer", () => {
    const out = decode(TaskEvent, bytes(JSON.stringify({ taskId: "bad id!", seq: 0, type: "x", state: "nope", at: "now" })));
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.error.kind).toBe("schema");
    expect(out.error.issues.map((i) => i.path).sort()).toEqual(["/seq", "/state", "/taskId"]);
  });

  it.each([
    ["not json", bytes("{nope"), "not_json"],
    ["invalid utf-8", new Uint8Array([0xff, 0xfe, 0x7b]), "not_utf8"],
    ["too large", new Uint8Array(MAX_BODY_BYTES + 1), "too_large"],
  ])("refuses %s without throwing", (_, body, kind) => {
    const out = decode(TaskOutcome, body);
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.error.kind).toBe(kind);
  });

  it("requires exactly one of xml and template in a submission, and rejects unknown fields", () => {
    expect(SubmitRequest.safeParse({ xml: "<task/>" }).success).toBe(true);
    expect(SubmitRequest.safeParse({ template: "<task/>", inputs: { a: 1 } }).success).toBe(true);
    expect(SubmitRequest.safeParse({}).success).toBe(false);
    expect(SubmitRequest.safeParse({ xml: "<task/>", template: "<task/>" }).success).toBe(false);
    expect(SubmitRequest.safeParse({ xml: "<task/>", extra: 1 }).success).toBe(false);
  });

  it.each(["", "a".repeat(65), "has space", "dot.ted", "star*", "gt>"])("refuses the task id %j", (taskId) => {
    expect(SubmitRequest.safeParse({ taskId, xml: "<task/>" }).success).toBe(false);
  });

  it("accepts a 64-character id of the allowed alphabet", () => {
    expect(SubmitRequest.safeParse({ taskId: "A-z_0".repeat(12) + "abcd", xml: "<t/>" }).success).toBe(true);
  });
});
