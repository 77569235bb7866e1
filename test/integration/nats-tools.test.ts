/**
 * NATS services as tools: a separate process that speaks only the NATS service protocol (test/support/
 * nats-tool-service.mjs, a plain NATS client, no dirigent code) serves endpoints; the Handler finds them through
 * `$SRV.INFO`, calls them, reads their service errors as errors, finds them again when one has no responders, and
 * `dirigent tools list` shows them.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { createSubjects, ToolCallEventData } from "../../protocol/index.js";
import type { Logger } from "../../actors/deps.js";
import { connectNats, type NatsConnection } from "../../runtime/nats/bus.js";
import { startNatsToolSource } from "../../runtime/tools/nats-services.js";
import { composeTools } from "../../runtime/tools/source.js";
import { listTools } from "../../runtime/cli/tools.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startReadyNode, stopProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const SERVICE = fileURLToPath(new URL("../support/nats-tool-service.mjs", import.meta.url));
const WEATHER = JSON.stringify({ city: "Oslo", forecast: "sunny", celsius: 21 });

let server: TestNatsServer;
let nc: NatsConnection;
const services: ChildProcess[] = [];

/** Starts the service process for subject root `root`; resolves once it serves. */
async function startService(root: string): Promise<ChildProcess> {
  const child = await startReadyNode(SERVICE, [server.url, root]);
  services.push(child);
  return child;
}

const stopService = stopProcess;

/**
 * Waits until the server has dropped a killed service's subscription to `subject`: a loaded server can take a moment
 * to see the socket closed, and a request sent meanwhile goes to the dead subscription and waits out its timeout.
 * Each probe is answered at once by the server (no responders) once the interest is gone.
 */
async function interestGone(subject: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      await nc.request(subject, new Uint8Array(), { timeout: 200 });
    } catch (err) {
      if (String(err).includes("503") || /no responders/i.test(String(err))) return;
    }
  }
  throw new Error(`the server still routes ${subject} to the stopped service`);
}

/** A logger keeping its error lines. */
function recordingLogger(): Logger & { errors: string[] } {
  const errors: string[] = [];
  const none = () => {};
  return { errors, debug: none, info: none, warn: none, error: (_obj, msg) => errors.push(msg ?? "") };
}

const randomRoot = () => `t${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  server = await startTestNatsServer({ jetstream: true });
  nc = await connectNats({ servers: server.url, name: "test-nats-tools" });
});

afterAll(async () => {
  for (const child of services) await stopService(child);
  await nc?.close();
  await server?.stop();
});

describe("the NATS service tool source", () => {
  it("finds the endpoints with tool metadata, calls them, and reads service errors and silence as errors", async () => {
    const root = randomRoot();
    await startService(root);
    const log = recordingLogger();
    const source = await startNatsToolSource(nc, { subjects: createSubjects(root), rediscoverMs: 0, log });
    const tools = composeTools([source], { timeoutMs: 300 });
    try {
      expect(source.tools.map((t) => [t.name, t.source, t.origin, t.idempotent])).toEqual([
        ["get_weather", "nats", "weather", true],
        ["lookup_stock", "nats", "weather", false],
        ["wait_forever", "nats", "weather", false],
      ]);
      expect(tools.definitions.find((d) => d.function.name === "get_weather")?.function).toEqual({
        name: "get_weather",
        description: "The weather forecast of a city.",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      });
      expect(log.errors).toEqual([
        expect.stringMatching(/endpoint 'bad_schema' left out: its dirigent.tool.parameters is not a usable JSON Schema/),
      ]);
      const call = (name: string, args: unknown) =>
        tools.run({ id: "c1", type: "function", function: { name, arguments: JSON.stringify(args) } }, new AbortController().signal);
      expect(await call("get_weather", { city: "Oslo" })).toEqual({ malformed: false, content: WEATHER });
      expect(await call("lookup_stock", {})).toEqual({ malformed: false, content: "error: the stock database is down (code 503)" });
      expect((await call("wait_forever", {})).content).toMatch(/^error: 'wait_forever' did not answer within 300 ms/);
      expect(await call("get_weather", {})).toMatchObject({
        malformed: true,
        content: expect.stringContaining("invalid arguments for 'get_weather'"),
      });
    } finally {
      await tools.close();
    }
  });

  it("finds the tools again when a called tool has no responders, and offers what is left", async () => {
    const root = randomRoot();
    const child = await startService(root);
    const source = await startNatsToolSource(nc, { subjects: createSubjects(root), rediscoverMs: 0, log: recordingLogger() });
    const tools = composeTools([source]);
    const changed = new Promise<void>((resolve) => source.watch?.(resolve));
    try {
      expect(tools.definitions.map((d) => d.function.name)).toContain("get_weather");
      await stopService(child);
      await interestGone(`${createSubjects(root).toolPrefix}weather.get_weather`);
      const answer = await tools.run(
        { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        new AbortController().signal,
      );
      expect(answer.content).toMatch(
        /^error: 'get_weather' has no responders on '.*\.tools\.weather\.get_weather' now \(its service stopped\); the tools offered were updated/,
      );
      await changed;
      expect(tools.definitions).toEqual([]);
    } finally {
      await tools.close();
    }
  });

  it("works as the Handler's NATS user of nats.conf: may ask $SRV.INFO and call under <root>.tools.>", async () => {
    await startService("dirigent");
    const handler = await connectNats({
      servers: server.url,
      name: "test-handler",
      user: "handler",
      pass: "dev-handler",
      inboxPrefix: "_INBOX_handler",
    });
    const source = await startNatsToolSource(handler, { subjects: createSubjects("dirigent"), rediscoverMs: 0 });
    const tools = composeTools([source]);
    try {
      expect(source.tools.map((t) => t.name)).toEqual(["get_weather", "lookup_stock", "wait_forever"]);
      const answer = await tools.run(
        { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        new AbortController().signal,
      );
      expect(answer.content).toBe(WEATHER);
    } finally {
      await tools.close();
      await handler.close();
    }
  });
});

describe("NATS service tools in a session", () => {
  it("offers the service's tools to the model, answers a call with the reply and a service error as an error", async () => {
    const root = randomRoot();
    await startService(root);
    await using stack = await startStack({
      url: server.url,
      root,
      script: {
        rules: [
          {
            match: { turn: 1 },
            toolCalls: [
              { name: "get_weather", arguments: { city: "Oslo" } },
              { name: "lookup_stock", arguments: { item: "umbrella" } },
            ],
          },
          { match: { hasToolResult: true }, reply: "Sunny, and no stock known." },
        ],
      },
      config: { natsTools: "on", reparse: false, continuationTools: [] },
    });
    const events = new Recorder<TaskEvent>();
    const xml =
      "<task><description>Weather in Oslo?</description><tools>read_file, list_files, get_weather, lookup_stock, wait_forever</tools></task>";
    const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    await events.until(
      (v) => v.some((e) => e.type.startsWith("task.") && e.state !== "running" && e.state !== "queued"),
      "the final event",
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Sunny, and no stock known." });
    const requests = stack.mock.requests.map(
      (r) => r.body as { tools?: Array<{ function: { name: string } }>; messages: Array<Record<string, unknown>> },
    );
    expect((requests[0]?.tools ?? []).map((t) => t.function.name)).toEqual(
      expect.arrayContaining(["read_file", "list_files", "get_weather", "lookup_stock", "wait_forever"]),
    );
    const toolMessages = (requests[1]?.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));
    expect(toolMessages).toEqual([WEATHER, "error: the stock database is down (code 503)"]);
    const calls = events.values.filter((e) => e.type === "tool.call").map((e) => ToolCallEventData.parse(e.data));
    expect(calls.map((c) => [c.tool, c.source, c.malformed])).toEqual([
      ["get_weather", "nats", false],
      ["lookup_stock", "nats", false],
    ]);
  });

  it("stops offering a tool whose service stopped to the sessions after its call had no responders", async () => {
    const root = randomRoot();
    const child = await startService(root);
    await using stack = await startStack({
      url: server.url,
      root,
      script: {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
          { match: { hasToolResult: true }, reply: "No weather today." },
        ],
      },
      // The continuation tools on: the Handler's sets of tools with them are made anew too.
      config: { natsTools: "on", reparse: false },
    });
    await stopService(child);
    const task = (tools: string) =>
      stack.client.run({ xml: `<task><description>Weather in Oslo?</description><tools>${tools}</tools></task>`, taskId: newTaskId() });
    expect(await task("get_weather")).toMatchObject({ status: "COMPLETE", content: "No weather today." });
    // A session keeps the tools it started with; the next one gets what the services offer now.
    expect(await task("get_weather")).toMatchObject({ status: "FAILED", error: { details: { missingTools: ["get_weather"] } } });
    expect(await task("read_file")).toMatchObject({ status: "COMPLETE" });
    const requests = stack.mock.requests.map((r) => r.body as { tools?: Array<{ function: { name: string } }> });
    const names = (i: number) => (requests[i]?.tools ?? []).map((t) => t.function.name);
    expect(names(0)).toEqual(expect.arrayContaining(["get_weather", "run_subtask"]));
    expect(names(2)).toEqual(["read_file", "run_subtask", "request_user_input"]);
  });

  it("is off unless DIRIGENT_NATS_TOOLS is on; `dirigent tools list` shows the services' tools with their source", async () => {
    const root = randomRoot();
    await startService(root);
    const off = await listTools({ nats: server.url }, { DIRIGENT_PREFIX: root });
    expect(off.map((t) => t.name)).toEqual(["read_file", "list_files"]);
    const listed = await listTools({ nats: server.url }, { DIRIGENT_PREFIX: root, DIRIGENT_NATS_TOOLS: "on" });
    expect(listed.map((t) => [t.name, t.source, t.origin ?? "", t.idempotent])).toEqual([
      ["read_file", "builtin", "", true],
      ["list_files", "builtin", "", true],
      ["get_weather", "nats", "weather", true],
      ["lookup_stock", "nats", "weather", false],
      ["wait_forever", "nats", "weather", false],
    ]);
  });
});
