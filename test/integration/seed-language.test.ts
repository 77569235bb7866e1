/**
 * What the seeds still ask of the task language, over a real nats-server: structured step results, `from="env:NAME"`
 * inputs from an allowlist, `<code>` steps refused, `<provider>`, `<expected_output>` and `<manual_xml>`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";
import { servedIndex } from "../support/corpus-harness.js";

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "LIST" }, reply: '[{"name": "a.py", "lines": 12}, {"name": "b.py", "lines": 40}]' },
        { match: { lastUser: "VERDICT" }, reply: '{"success": false, "feedback": "too short"}' },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const lastUsers = (from: number) =>
  mock.requests.slice(from).map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));

describe("structured step results", () => {
  it("lets a later step read an earlier step's parsed JSON, status and content", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential"><steps>
      <task><description>LIST the files</description></task>
      <task><description>SIZE {{step_results[0].parsedContent[1].name}} has {{step_results[0].parsedContent[1].lines}} lines ({{step_results[0].status}})</description></task>
      <task><description>LAST {{result}} / {{step_results[1]}}</description></task>
    </steps></task>`;
    const before = mock.requests.length;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("COMPLETE");
    expect(lastUsers(before)).toEqual([
      "LIST the files",
      "SIZE b.py has 40 lines (COMPLETE)",
      "LAST echo:SIZE b.py has 40 lines (COMPLETE) / echo:SIZE b.py has 40 lines (COMPLETE)",
    ]);
  });

  it("refuses a <code> step with the reason, at its line and column", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential"><steps>\n  <task><description>x</description>\n    <code>return 1;</code></task>\n</steps></task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "not_supported" });
    expect(outcome.error?.message).toMatch(/inline <code> at line 3, column 5 is not run: .*script task/);
  });
});

describe('from="env:NAME"', () => {
  it("reads an allowlisted variable of the Evaluator's environment, and refuses any other", async () => {
    process.env["DIRIGENT_TEST_REGION"] = "eu-west-3";
    process.env["DIRIGENT_TEST_UNLISTED"] = "hidden";
    try {
      await using stack = await startStack({
        url: server.url,
        mock,
        config: { envInputs: ["DIRIGENT_TEST_REGION", "DIRIGENT_TEST_UNSET"] },
      });
      const read = (name: string) => `<task><description>REGION {{r}}</description><input name="r" from="env:${name}"/></task>`;
      const ok = await stack.client.run({ xml: read("DIRIGENT_TEST_REGION"), taskId: newTaskId() });
      expect(ok).toMatchObject({ status: "COMPLETE", content: "echo:REGION eu-west-3" });
      const unlisted = await stack.client.run({ xml: read("DIRIGENT_TEST_UNLISTED"), taskId: newTaskId() });
      expect(unlisted.error).toMatchObject({ reason: "input_validation_failure" });
      expect(unlisted.error?.message).toMatch(
        /reads the environment variable DIRIGENT_TEST_UNLISTED, which is not an environment input \(DIRIGENT_ENV_INPUTS/,
      );
      const unset = await stack.client.run({ xml: read("DIRIGENT_TEST_UNSET"), taskId: newTaskId() });
      expect(unset.error?.message).toBe("missing required input: 'env:DIRIGENT_TEST_UNSET' (not set in the Evaluator's environment)");
    } finally {
      delete process.env["DIRIGENT_TEST_REGION"];
      delete process.env["DIRIGENT_TEST_UNLISTED"];
    }
  });
});

describe("<provider>, <expected_output>, <manual_xml>", () => {
  it("sends a task's model calls to the provider it names, and fails one the configuration does not name", async () => {
    const second = await startMockLlm({ port: 0, script: { rules: [], default: { reply: "from the second server" } } });
    try {
      await using stack = await startStack({ url: server.url, mock, config: { providers: { second: second.url } } });
      const before = mock.requests.length;
      const outcome = await stack.client.run({
        xml: "<task><provider>second</provider><description>hello</description></task>",
        taskId: newTaskId(),
      });
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "from the second server" });
      expect(second.requests).toHaveLength(1);
      expect(mock.requests.length).toBe(before);
      const unknown = await stack.client.run({
        xml: "<task><provider>elsewhere</provider><description>hello</description></task>",
        taskId: newTaskId(),
      });
      expect(unknown.status).toBe("FAILED");
      expect(unknown.error?.message).toMatch(/unknown provider 'elsewhere': DIRIGENT_PROVIDERS names second/);
    } finally {
      await second.close();
    }
  });

  it("gives the model the task's <expected_output>", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const before = mock.requests.length;
    const xml = "<task><description>Name a colour</description><expected_output>One word, lower case.</expected_output></task>";
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("COMPLETE");
    expect(lastUsers(before)).toEqual(["Name a colour\n\nExpected output:\nOne word, lower case."]);
  });

  it("refuses a provider name that is no name when the template is read", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const refused = await stack.client
      .run({ xml: "<task><provider>a b</provider><description>x</description></task>" })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "INVALID_TEMPLATE" });
    expect(String(refused)).toMatch(/invalid <provider> 'a b': expected the name of a provider/);
  });
});

describe('seed-era type="director" and type="evaluator"', () => {
  const toolNames = (i: number) =>
    ((mock.requests[i]?.body as { tools?: { function: { name: string } }[] }).tools ?? []).map((t) => t.function.name);

  it("offers a director the evaluation continuation, as a subtype director is", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const before = mock.requests.length;
    await stack.client.run({ xml: '<task type="director"><description>Plan the trip</description></task>', taskId: newTaskId() });
    expect(toolNames(before)).toContain("request_evaluation");
    const plain = mock.requests.length;
    await stack.client.run({ xml: "<task><description>Plan the trip</description></task>", taskId: newTaskId() });
    expect(toolNames(plain)).not.toContain("request_evaluation");
  });

  it("asks an evaluator for the evaluation schema and reads its answer as an evaluation", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const before = mock.requests.length;
    const judged = await stack.client.run({
      xml: '<task type="evaluator"><description>VERDICT on the draft</description></task>',
      taskId: newTaskId(),
    });
    expect(lastUsers(before)[0]).toMatch(/^VERDICT on the draft\n\nAnswer with JSON only: \{"success": true or false, "feedback"/);
    expect(judged).toMatchObject({ status: "COMPLETE", parsedContent: { success: false, feedback: "too short" } });
    expect(judged.notes).toMatchObject({ success: false, feedback: "too short" });
    const unreadable = await stack.client.run({
      xml: '<task type="evaluator"><description>Say something</description></task>',
      taskId: newTaskId(),
    });
    expect(unreadable.parsedContent).toEqual({ success: false, feedback: "Evaluation failed or structure invalid." });
  });
});

describe("an associative memory task in a sequential", () => {
  it("feeds the files Memory matched to a later step", async () => {
    await using stack = await startStack({ url: server.url, mock });
    await stack.transport.index.updateGlobalIndex([
      { path: "/srv/app/docs/billing.md", metadata: "billing: invoice rounding rules and VAT computation" },
      { path: "/srv/app/src/auth.py", metadata: "authentication: user login and password checks" },
    ]);
    await servedIndex(stack, "invoice VAT");
    const xml = `<task type="sequential"><steps>
      <task type="associative_memory"><query>invoice VAT</query><constraints><max_results>1</max_results></constraints></task>
      <task><description>READ {{step_results[0].parsedContent.matches[0].path}}</description></task>
    </steps></task>`;
    const before = mock.requests.length;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:READ /srv/app/docs/billing.md" });
    // The memory step asked no model.
    expect(lastUsers(before)).toEqual(["READ /srv/app/docs/billing.md"]);
  });
});
