/**
 * A 5 MB input end to end, over a nats-server whose messages carry at most 2 MB (the repository's nats.conf): the
 * client's submission, the Director's evaluation request and the Evaluator's Handler request are each larger than
 * one message, and travel by reference through the bodies bucket (runtime/nats/chunks.ts). Each role runs in a
 * process of its own, so every one of those requests crosses NATS. The limits are raised above 1 MiB by the settings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { newTaskId } from "../support/stack.js";

const INPUT_BYTES = 5 * 1000 * 1000;

let server: TestNatsServer;
let mock: MockLlmServer;
let transport: OpenTransport | undefined;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ match: { lastUser: { regex: "^HUGE" } }, reply: "read all of it" }] } });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await transport?.close();
  await mock?.close();
  await server?.stop();
});

describe("a 5 MB input", () => {
  it("runs to its end with every role in its own process, each request between them larger than one message", async () => {
    const root = randomRoot();
    const env = {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_MODEL: "mock-model",
      DIRIGENT_MAX_SUBMISSION_BYTES: String(8 * 1024 * 1024),
      DIRIGENT_MAX_INPUT_BYTES: String(8 * 1024 * 1024),
      // A context window the input fits: the point here is how it travels, not the context limit.
      DIRIGENT_CONTEXT_WINDOW_TOKENS: "20000000",
      DIRIGENT_MAX_CONTEXT_WINDOW_FRACTION: "1",
    };
    for (const role of ["director", "evaluator", "handler", "memory"]) {
      processes.push(startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root], env));
    }
    await Promise.all(processes.map((p) => p.waitFor(/ready/)));

    transport = await openNatsTransport(server.url, createSubjects(root), { name: "large-input", log: silentLogger, roles: [] });
    expect(transport.bus.maxMessageBytes).toBeLessThan(INPUT_BYTES / 2);
    const client = new DirigentClient(transport.bus, createSubjects(root));
    const doc = `HUGE ${"0123456789abcdef".repeat(INPUT_BYTES / 16)}`;
    const taskId = newTaskId();
    const outcome = await client.run({ xml: "<task><description>{{doc}}</description></task>", inputs: { doc }, taskId });
    expect(outcome).toMatchObject({ taskId, status: "COMPLETE", content: "read all of it" });

    // The input reached the model whole.
    expect(mock.requests).toHaveLength(1);
    const user = mock.requests[0]?.body.messages.filter((m) => m.role === "user").at(-1);
    expect(typeof user?.content === "string" && user.content.includes(doc)).toBe(true);
    expect((await client.get(taskId)).state).toBe("completed");
  });
});
