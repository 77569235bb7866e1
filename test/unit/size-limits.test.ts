/** Size limits (actors/size-limits.ts), their settings, the CLI's checks, and events and results cut to fit one message. */
import { describe, expect, it } from "vitest";
import { decodeSubmission } from "../../actors/director/intake.js";
import { fitEvent, fitOutcome, KEPT_MESSAGE_CHARS } from "../../actors/director/message-fit.js";
import { DEFAULT_SIZE_LIMITS, SIZE_SETTINGS, checkInputs, checkTemplate } from "../../actors/size-limits.js";
import { encode, encodeJson, TaskOutcome, type TaskEvent, type TaskId } from "../../protocol/index.js";
import { parseInputs, UsageError } from "../../runtime/cli/common.js";
import { DEFAULTS, ENV_NAMES, sizeLimitsFromEnv } from "../../runtime/config.js";

const limits = { submissionBytes: 10_000, inputBytes: 100, templateBytes: 1000 };
const xml = (description: string) => `<task><description>${description}</description></task>`;

describe("size limits", () => {
  it("name the same settings and defaults as the configuration", () => {
    expect(SIZE_SETTINGS).toEqual({
      submissionBytes: ENV_NAMES.maxSubmissionBytes,
      inputBytes: ENV_NAMES.maxInputBytes,
      templateBytes: ENV_NAMES.maxTemplateBytes,
    });
    expect(DEFAULT_SIZE_LIMITS).toEqual({
      submissionBytes: DEFAULTS.maxSubmissionBytes,
      inputBytes: DEFAULTS.maxInputBytes,
      templateBytes: DEFAULTS.maxTemplateBytes,
    });
    expect(sizeLimitsFromEnv({ DIRIGENT_MAX_INPUT_BYTES: "5" })).toEqual({ ...DEFAULT_SIZE_LIMITS, inputBytes: 5 });
    expect(() => sizeLimitsFromEnv({ DIRIGENT_MAX_TEMPLATE_BYTES: "-1" })).toThrow(/DIRIGENT_MAX_TEMPLATE_BYTES/);
    // A submission and an input may be raised up to the largest stored value (a request larger than one message
    // travels by reference); a template only lowered (the parser's ceiling).
    expect(sizeLimitsFromEnv({ DIRIGENT_MAX_SUBMISSION_BYTES: "8000000" }).submissionBytes).toBe(8_000_000);
    expect(() => sizeLimitsFromEnv({ DIRIGENT_MAX_INPUT_BYTES: String(65 * 1024 * 1024) })).toThrow(
      /DIRIGENT_MAX_INPUT_BYTES: must be at most 67108864/,
    );
    expect(() => sizeLimitsFromEnv({ DIRIGENT_MAX_TEMPLATE_BYTES: "2000000" })).toThrow(
      /DIRIGENT_MAX_TEMPLATE_BYTES: must be at most 1048576/,
    );
  });

  it("measure UTF-8 bytes, not characters", () => {
    // 400 characters of three bytes each: 1200 bytes, over a 1000-byte limit.
    expect(checkTemplate("€".repeat(400), limits)).toEqual({
      what: "template",
      bytes: 1200,
      limit: 1000,
      setting: "DIRIGENT_MAX_TEMPLATE_BYTES",
    });
    expect(checkTemplate("a".repeat(1000), limits)).toBeUndefined();
    expect(checkInputs({ a: "ok", b: ["x".repeat(200)] }, limits)).toMatchObject({ what: "input 'b'", bytes: 204 });
  });

  it("refuse a submission, an input or a template over its limit with PAYLOAD_TOO_LARGE naming the setting", () => {
    const cases: Array<[Uint8Array, RegExp]> = [
      [
        new TextEncoder().encode(xml("x".repeat(20_000))),
        /^submission of \d+ bytes exceeds the limit of 10000 bytes \(DIRIGENT_MAX_SUBMISSION_BYTES\)$/,
      ],
      [
        encodeJson({ xml: xml("{{a}}"), inputs: { a: "y".repeat(101) } }),
        /^input 'a' of 101 bytes exceeds the limit of 100 bytes \(DIRIGENT_MAX_INPUT_BYTES\)$/,
      ],
      [
        new TextEncoder().encode(xml("z".repeat(2000))),
        /^template of \d+ bytes exceeds the limit of 1000 bytes \(DIRIGENT_MAX_TEMPLATE_BYTES\)$/,
      ],
    ];
    for (const [body, message] of cases) {
      const decoded = decodeSubmission(body, limits);
      expect(decoded.ok).toBe(false);
      if (!decoded.ok) {
        expect(decoded.reply.error.code).toBe("PAYLOAD_TOO_LARGE");
        expect(decoded.reply.error.message).toMatch(message);
      }
    }
    expect(decodeSubmission(encodeJson({ xml: xml("{{a}}"), inputs: { a: "y".repeat(100) } }), limits).ok).toBe(true);
  });

  it("make a CLI --input value over the limit a usage error", () => {
    expect(() => parseInputs([`doc=${"q".repeat(101)}`], limits)).toThrow(UsageError);
    expect(() => parseInputs([`doc=${"q".repeat(101)}`], limits)).toThrow(
      "--input: PAYLOAD_TOO_LARGE: input 'doc' of 101 bytes exceeds the limit of 100 bytes (DIRIGENT_MAX_INPUT_BYTES)",
    );
    expect(parseInputs(["doc=short"], limits)).toEqual({ doc: "short" });
  });
});

describe("events and results cut to fit one message", () => {
  const event: TaskEvent = {
    taskId: "t1" as TaskId,
    seq: 3,
    type: "model.turn",
    state: "running",
    at: "2026-01-01T00:00:00.000Z",
    message: "m".repeat(10_000),
    data: { big: "d".repeat(50_000) },
  };

  it("keep an event that fits as it is, and cut one that does not by the documented rule", () => {
    expect(JSON.parse(new TextDecoder().decode(fitEvent(event, 100_000)))).toEqual(event);
    const body = fitEvent(event, 20_000);
    expect(body.byteLength).toBeLessThanOrEqual(20_000);
    const cut = JSON.parse(new TextDecoder().decode(body)) as TaskEvent;
    expect(cut).toMatchObject({ taskId: "t1", seq: 3, type: "model.turn", data: { truncated: true } });
    expect(cut.message).toHaveLength(KEPT_MESSAGE_CHARS + 1);
    expect((cut.data as { bytes: number }).bytes).toBeGreaterThan(60_000);
  });

  it("cut a result's content to fit and say so in its notes", () => {
    const outcome: TaskOutcome = {
      taskId: "t1" as TaskId,
      status: "COMPLETE",
      content: 'é"'.repeat(30_000),
      notes: { model: "m" },
      parsedContent: { x: 1 },
    };
    expect(fitOutcome(outcome, 1_000_000)).toBe(outcome);
    const cut = fitOutcome(outcome, 10_000);
    expect(encode(TaskOutcome, cut).byteLength).toBeLessThanOrEqual(10_000);
    expect(cut.content.length).toBeGreaterThan(1000);
    expect(outcome.content.startsWith(cut.content)).toBe(true);
    expect(cut.parsedContent).toBeUndefined();
    expect(cut.notes).toMatchObject({ model: "m", truncated: { bytes: encode(TaskOutcome, outcome).byteLength } });
  });
});
