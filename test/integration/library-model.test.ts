/**
 * The library chooses its model as the CLI does: `startSystem` with a configuration that names no model server (no
 * `OPENAI_API_KEY`, no `OPENAI_BASE_URL`) answers with the offline mock model and says so in a log line; a model
 * server that cannot be reached is named in the error.
 */
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, DirigentClient, loadConfig, openNatsTransport, silentLogger, startSystem } from "../../runtime/index.js";
import { createModelClient } from "../../runtime/model/openai.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId } from "../support/stack.js";

let server: TestNatsServer;
beforeAll(async () => {
  server = await startTestNatsServer();
});
afterAll(async () => server?.stop());

/** A loopback port nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

describe("the library's model", () => {
  it("answers with the offline mock model when no model is configured, and logs that it does", async () => {
    const config = loadConfig({ prefix: randomRoot() }, { PATH: process.env.PATH ?? "" });
    expect(config.openaiApiKey ?? config.openaiBaseUrl).toBeUndefined();
    const said: string[] = [];
    const log = { ...silentLogger, warn: (_: object, msg?: string) => void said.push(msg ?? "") };
    const subjects = createSubjects(config.prefix);
    const transport = await openNatsTransport(server.url, subjects, { name: "library-model", log });
    const system = await startSystem({ config, transport, log, metrics: false });
    try {
      expect(system.offlineModelUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      expect(said).toContain(
        `no OPENAI_API_KEY or OPENAI_BASE_URL set: answering with the offline mock model at ${system.offlineModelUrl}`,
      );
      const client = new DirigentClient(transport.bus, subjects);
      const outcome = await client.run({ xml: "<task><description>Write a haiku about the sea</description></task>", taskId: newTaskId() });
      expect(outcome).toMatchObject({ status: "COMPLETE", content: expect.stringContaining("Small actors listen") });
    } finally {
      await system.stop();
      await transport.close();
    }
  });

  it("names the model server it could not reach", async () => {
    const baseURL = `http://127.0.0.1:${await closedPort()}/v1`;
    const callModel = createModelClient({ baseURL, apiKey: "test", timeoutMs: 10_000, maxRetries: 0 });
    const request = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };
    await expect(callModel(request, new AbortController().signal)).rejects.toThrow(`(model server ${baseURL})`);
  });
});
