import { describe, expect, it } from "vitest";
import {
  checkTemplate,
  COMPILER_SYSTEM_PROMPT,
  decomposeRequest,
  describeFailure,
  extractXml,
  initialMessages,
  requestMessage,
  retryMessage,
} from "../../actors/compiler/prompt.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { CompileRequest, SubmitRequest, validate } from "../../protocol/index.js";

const TASK = "<task><description>Say hi.</description></task>";

describe("extractXml", () => {
  it("takes a bare answer as it is", () => {
    expect(extractXml(TASK)).toBe(TASK);
  });

  it("strips Markdown fences and the prose around them", () => {
    expect(extractXml(`Here is the template:\n\n\`\`\`xml\n${TASK}\n\`\`\`\n\nIt greets.`)).toBe(TASK);
    expect(extractXml(`\`\`\`\n${TASK}\n\`\`\``)).toBe(TASK);
  });

  it("skips a fence without markup and uses the first one holding XML", () => {
    expect(extractXml(`\`\`\`text\nplan: greet\n\`\`\`\n\`\`\`xml\n${TASK}\n\`\`\`\n\`\`\`xml\n<task/>\n\`\`\``)).toBe(TASK);
  });

  it("takes the outermost elements: from the first element to the last closing tag, ignoring prose with '>'", () => {
    expect(extractXml(`Sure! ${TASK} Flow: input -> output.`)).toBe(TASK);
    const two = `<template name="f" params="x"><task><description>{{x}}</description></task></template>\n<call template="f"><arg>"a"</arg></call>`;
    expect(extractXml(`Answer:\n${two}\nDone.`)).toBe(two);
    expect(extractXml(`<!-- greet -->\n${TASK}`)).toBe(`<!-- greet -->\n${TASK}`);
    expect(extractXml("Here: <task/> ok")).toBe("<task/>");
  });

  it("handles an unterminated fence (a cut-off answer) and an answer with no XML", () => {
    expect(extractXml(`\`\`\`xml\n${TASK}`)).toBe(TASK);
    expect(extractXml("  I cannot do that.  ")).toBe("I cannot do that.");
  });
});

describe("checkTemplate", () => {
  it("accepts a valid template", () => {
    expect(checkTemplate(TASK)).toEqual({ ok: true });
  });

  it("reports parser errors with their line and column", () => {
    const check = checkTemplate("<task>\n  <description>x</descriptio>\n</task>");
    expect(check.ok).toBe(false);
    if (check.ok) return;
    expect(check.errors).toHaveLength(1);
    expect(check.errors[0]).toMatch(/^line 2, col \d+: not well-formed XML: mismatched tag/);
    expect(check.line).toBe(2);
  });

  it("treats unknown elements, unknown task types, stray text and no entry as errors", () => {
    const unknown = checkTemplate('<task type="parallel"><validation_rules>1</validation_rules><description>x</description></task>');
    expect(unknown.ok).toBe(false);
    if (!unknown.ok) {
      expect(unknown.errors.join("\n")).toMatch(/unknown task type 'parallel'/);
      expect(unknown.errors.join("\n")).toMatch(/<validation_rules> is not supported/);
    }
    expect(checkTemplate("<task><foo>1</foo><description>x</description></task>")).toMatchObject({
      ok: false,
      errors: [expect.stringMatching(/unknown element <foo> inside <task>/)],
    });
    const none = checkTemplate('<template name="f"><task><description>x</description></task></template>');
    expect(none).toMatchObject({ ok: false, errors: [expect.stringMatching(/defines no task to run/)] });
    expect(checkTemplate("no xml here")).toMatchObject({ ok: false });
    expect(checkTemplate("")).toMatchObject({ ok: false, errors: [expect.stringMatching(/holds no XML/)] });
  });

  it("in decompose mode requires a sequential task of two steps or more, or a reduce task", () => {
    expect(checkTemplate(TASK, "decompose")).toMatchObject({
      ok: false,
      errors: [expect.stringMatching(/must be one <task type="sequential">.*got type 'atomic'/)],
    });
    const one = `<task type="sequential"><steps>${TASK}</steps></task>`;
    expect(checkTemplate(one, "decompose")).toMatchObject({ ok: false, errors: [expect.stringMatching(/at least two <steps>/)] });
    expect(checkTemplate(`<task type="sequential"><steps>${TASK}${TASK}</steps></task>`, "decompose")).toEqual({ ok: true });
    const reduce = `<task type="reduce"><inputs><input name="a">1</input></inputs><inner_task><description>{{current_input}}</description></inner_task><reduction_task><description>{{accumulator}} {{current_result}}</description></reduction_task></task>`;
    expect(checkTemplate(reduce, "decompose")).toEqual({ ok: true });
  });
});

describe("compiler messages", () => {
  it("the system prompt's example is a valid template", () => {
    const example = COMPILER_SYSTEM_PROMPT.slice(COMPILER_SYSTEM_PROMPT.indexOf("Example:") + "Example:".length);
    expect(parseTemplate(example.trim()).ok).toBe(true);
    expect(checkTemplate(extractXml(example))).toEqual({ ok: true });
  });

  it("a compile request names the request and the inputs", () => {
    const message = requestMessage({ type: "compiler.compile", prompt: "Summarise the notes.", inputNames: ["notes", "tone"] });
    expect(message).toContain("Request:\nSummarise the notes.");
    expect(message).toContain("{{notes}}, {{tone}}");
    expect(requestMessage({ type: "compiler.compile", prompt: "Greet." })).toMatch(/run with no inputs/);
    expect(initialMessages({ type: "compiler.compile", prompt: "Greet." })).toEqual([
      { role: "system", content: COMPILER_SYSTEM_PROMPT },
      { role: "user", content: expect.stringContaining("Greet.") },
    ]);
  });

  it("a decompose request names the failure, the node, and asks for sequential or reduce", () => {
    const message = requestMessage({
      type: "compiler.compile",
      mode: "decompose",
      prompt: "Summarise every file of the repository.",
      failed: {
        error: "context window exhausted: 130000/102400 tokens",
        xml: "<task><description>Summarise every file</description></task>",
      },
      inputNames: ["repo"],
    });
    expect(message).toContain("ran out of resources: context window exhausted: 130000/102400 tokens");
    expect(message).toContain("What the node had to do:\nSummarise every file of the repository.");
    expect(message).toContain("The node as written:\n<task><description>Summarise every file</description></task>");
    expect(message).toMatch(/<task type="sequential"> or <task type="reduce">/);
    expect(message).toContain("{{repo}}");
  });

  it("decomposeRequest describes a resource exhaustion and fits the protocol's limits", () => {
    const request = decomposeRequest({
      prompt: "Summarise every file.",
      error: {
        type: "RESOURCE_EXHAUSTION",
        resource: "context",
        message: "context window exhausted",
        metrics: { used: 130000, limit: 102400 },
      },
      xml: "x".repeat(70_000),
      inputNames: ["repo"],
    });
    expect(request).toMatchObject({ type: "compiler.compile", mode: "decompose", prompt: "Summarise every file.", inputNames: ["repo"] });
    expect(request.failed?.error).toBe("context limit reached: context window exhausted (used 130000 of 102400)");
    expect(validate(CompileRequest, request).ok).toBe(true);
    expect(describeFailure({ type: "TASK_FAILURE", reason: "model_error", message: "boom" })).toBe("TASK_FAILURE: boom");
  });

  it("the retry message lists every error", () => {
    expect(retryMessage(["line 1, col 2: bad", "no entry"])).toBe(
      "That answer is not a valid template:\n- line 1, col 2: bad\n- no entry\nAnswer again with the whole corrected XML only.",
    );
  });
});

describe("compile and submit messages", () => {
  it("a decompose request needs the failed node; attempts are bounded", () => {
    expect(validate(CompileRequest, { type: "compiler.compile", prompt: "x" }).ok).toBe(true);
    const noFailed = validate(CompileRequest, { type: "compiler.compile", prompt: "x", mode: "decompose" });
    expect(noFailed.ok ? "" : noFailed.error.message).toMatch(/\/failed: 'failed' is required in decompose mode/);
    expect(validate(CompileRequest, { type: "compiler.compile", prompt: "x", maxAttempts: 6 }).ok).toBe(false);
    expect(validate(CompileRequest, { type: "compiler.compile", prompt: "" }).ok).toBe(false);
    expect(validate(CompileRequest, { type: "compiler.compile", prompt: "x".repeat(65_537) }).ok).toBe(false);
  });

  it("a submission gives exactly one of xml, template and prompt", () => {
    expect(validate(SubmitRequest, { prompt: "Greet." }).ok).toBe(true);
    expect(validate(SubmitRequest, { xml: TASK }).ok).toBe(true);
    for (const body of [{ xml: TASK, prompt: "Greet." }, { template: TASK, prompt: "Greet." }, {}]) {
      const result = validate(SubmitRequest, body);
      expect(result.ok ? "" : result.error.message).toMatch(/exactly one of 'xml', 'template' or 'prompt' is required/);
    }
  });
});
