/**
 * Every subject answers malformed input with an error reply naming the problem, and the runtime keeps running:
 * thousands of generated bad messages, then a valid task that still completes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode, ErrorReply } from "../../protocol/index.js";
import { prng } from "../support/hostile.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
beforeAll(async () => {
  server = await startTestNatsServer();
});
afterAll(async () => server?.stop());

const enc = (s: string) => new TextEncoder().encode(s);

function generators(rand: () => number): Array<() => Uint8Array> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const junk = (n: number) => Array.from({ length: n }, () => String.fromCharCode(32 + Math.floor(rand() * 95))).join("");
  return [
    () => new Uint8Array(Array.from({ length: 1 + Math.floor(rand() * 64) }, () => Math.floor(rand() * 256))),
    () => enc(junk(1 + Math.floor(rand() * 80)).replace(/^[<{[\s"\d-]+/, "x")),
    () => enc(JSON.stringify(pick([null, 42, "text", [], [1, 2], true, -1.5]))),
    () => enc(JSON.stringify({ [junk(5)]: junk(8) })),
    () => enc(JSON.stringify({ xml: pick([42, null, [], {}, ""]) })),
    () => enc(JSON.stringify({ xml: "<task/>", template: "<task/>" })),
    () =>
      enc(
        JSON.stringify({
          taskId: pick(["", "a b", "x".repeat(65), "a.b", "*", ">", "é"]),
          xml: "<task><description>x</description></task>",
        }),
      ),
    () => enc(JSON.stringify({ xml: "<task><description>x</description></task>", inputs: pick([[], "s", 3, null]) })),
    () =>
      enc(
        JSON.stringify({
          xml: pick([
            "<task>",
            "<task></tsk>",
            "<task a=1/>",
            "<<>>",
            "<task><description>x</task>",
            "<template name='f'><task/></template>",
          ]),
        }),
      ),
    () => enc(pick(["<task>", "<task><description>unclosed", "<a></b>", "<task attr='1' attr='2'/>"])),
    () => enc("[".repeat(5000)),
    () => new Uint8Array([0xc3, 0x28, 0x7b, 0x7d]),
  ];
}

describe("bad input on every subject", () => {
  it("answers 3,000 malformed messages with error replies and still runs a valid task", async () => {
    await using stack = await startStack({
      url: server.url,
      script: { rules: [{ reply: "still alive" }] },
    });
    const s = stack.system.subjects;
    const rand = prng(20261122);
    const gens = generators(rand);
    const targets = [s.submit, s.evaluate, s.execute, s.memoryMatch, s.taskGet("some-task"), s.taskCancel("some-task")];
    const codes = new Map<string, number>();
    const bus = stack.transport.bus;
    const total = 3000;
    for (let start = 0; start < total; start += 250) {
      await Promise.all(
        Array.from({ length: Math.min(250, total - start) }, async (_, i) => {
          const n = start + i;
          const subject = targets[n % targets.length] ?? s.submit;
          const body = gens[Math.floor(n / targets.length) % gens.length]?.() ?? new Uint8Array();
          const raw = await bus.request(subject, body, { timeoutMs: 10_000 });
          const reply = ErrorReply.safeParse(JSON.parse(new TextDecoder().decode(raw)));
          // get/cancel of an unknown (well-formed) id is NOT_FOUND, which is also an error reply.
          expect(reply.success, `${subject} answered ${new TextDecoder().decode(raw)}`).toBe(true);
          if (reply.success) {
            expect(ErrorCode.options).toContain(reply.data.error.code);
            expect(reply.data.error.message.length).toBeGreaterThan(0);
            codes.set(reply.data.error.code, (codes.get(reply.data.error.code) ?? 0) + 1);
          }
        }),
      );
    }
    expect([...codes.keys()].sort()).toEqual(expect.arrayContaining(["INVALID_MESSAGE", "INVALID_TEMPLATE", "INVALID_ID", "NOT_FOUND"]));

    const oversize = await bus.request(s.submit, new Uint8Array(1024 * 1024 + 10).fill(0x20), { timeoutMs: 10_000 });
    expect(JSON.parse(new TextDecoder().decode(oversize))).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE" } });

    const outcome = await stack.client.run({ xml: "<task><description>are you there?</description></task>", taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "still alive" });
  });

  it("refuses a template with an unknown element at submission, with its line and column, and stores nothing", async () => {
    await using stack = await startStack({ url: server.url });
    const taskId = newTaskId();
    const xml = "<task>\n  <descripton>Say hi</descripton>\n</task>";
    const raw = await stack.transport.bus.request(stack.system.subjects.submit, enc(JSON.stringify({ taskId, xml })), {
      timeoutMs: 10_000,
    });
    expect(JSON.parse(new TextDecoder().decode(raw))).toEqual({
      error: {
        code: "INVALID_TEMPLATE",
        message: "unknown element <descripton> inside <task>; did you mean <description>?",
        line: 2,
        col: 3,
      },
    });
    await expect(stack.client.get(taskId)).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("refuses at submission a {{name}} of an atomic task that no input can fill; a submitted or declared input fills it", async () => {
    await using stack = await startStack({ url: server.url, script: { rules: [{ reply: "hello" }] } });
    const submit = async (body: object) =>
      JSON.parse(
        new TextDecoder().decode(
          await stack.transport.bus.request(stack.system.subjects.submit, enc(JSON.stringify(body)), { timeoutMs: 10_000 }),
        ),
      ) as unknown;
    const xml = "\n<task><description>Say hello to {{name}}</description></task>";
    expect(await submit({ xml })).toEqual({
      error: {
        code: "INVALID_TEMPLATE",
        message: expect.stringMatching(
          /^\{\{name\}\} in <description> can never be filled: no input 'name' is submitted or bound by an <input> of the task/,
        ),
        line: 2,
        col: 1,
      },
    });
    expect(await submit({ xml, inputs: { name: "Ada" } })).toMatchObject({ status: "accepted" });
    const declared =
      '<task><description>Say hello to {{name.first}}</description><inputs><input name="name">{"first":"Ada"}</input></inputs></task>';
    expect(await submit({ xml: declared })).toMatchObject({ status: "accepted" });
  });

  it("lets a raw XML submission choose its task id with the Dirigent-Task-Id header, checked like any task id", async () => {
    await using stack = await startStack({ url: server.url, script: { rules: [{ reply: "raw and named" }] } });
    const bus = stack.transport.bus;
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId);
    await bus.flush();
    const xml = enc("<task><description>hi</description></task>");
    const raw = await bus.request(stack.system.subjects.submit, xml, { timeoutMs: 10_000, headers: { "dirigent-task-id": taskId } });
    expect(JSON.parse(new TextDecoder().decode(raw))).toEqual({ taskId, status: "accepted" });
    expect(await watch.result).toMatchObject({ taskId, status: "COMPLETE", content: "raw and named" });
    await watch.close();
    const bad = await bus.request(stack.system.subjects.submit, xml, { timeoutMs: 10_000, headers: { "Dirigent-Task-Id": "a.b" } });
    expect(JSON.parse(new TextDecoder().decode(bad))).toMatchObject({ error: { code: "INVALID_ID" } });
  });

  it("answers a bad task id in a get subject with INVALID_ID", async () => {
    await using stack = await startStack({ url: server.url });
    const raw = await stack.transport.bus.request(`${stack.root}.tasks.${"x".repeat(65)}.get`, new Uint8Array(), { timeoutMs: 5000 });
    expect(JSON.parse(new TextDecoder().decode(raw))).toMatchObject({ error: { code: "INVALID_ID" } });
  });
});
