/**
 * Metrics of all roles in one process (requests between them as calls, actors/local.ts): a system started with a
 * metrics port serves them on loopback; a task's end, its Handler session, model call and tool call are counted,
 * and the endpoint goes with the system. On NATS the intake queue and reconnects are read too. Without a port there
 * is no endpoint.
 */
import { describe, expect, it } from "vitest";
import { defineTool } from "../../runtime/tools/typescript.js";
import { z } from "zod";
import { startTestNatsServer } from "../support/nats-server.js";
import { pollUntil } from "../support/process-group.js";
import { startStack } from "../support/stack.js";
import { silentLogger } from "../../actors/deps.js";
import { startSystem } from "../../runtime/system.js";
import { openMemoryTransport } from "../../runtime/transport.js";

describe("metrics of one process running every role", () => {
  it("counts a task, its session, model calls and tool call, by role; stops with the system", async () => {
    const stack = await startStack({
      config: { metricsPort: 0, modelPrices: { "mock-model": { input: 1, output: 1 } } },
      tools: [defineTool({ name: "clock", description: "the time", parameters: z.object({}), run: () => "noon" })],
      script: {
        rules: [{ match: { hasToolResult: false }, toolCalls: [{ name: "clock", arguments: {} }] }],
        default: { reply: "it is noon" },
      },
    });
    const url = stack.system.metricsUrl;
    try {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const outcome = await stack.client.run({ xml: "<task><description>what time is it?</description><tools>clock</tools></task>" });
      expect(outcome.status).toBe("COMPLETE");
      const text = await (await fetch(url ?? "")).text();
      expect(text).toContain('dirigent_tasks_total{state="completed",type="atomic"} 1');
      expect(text).toContain('dirigent_step_duration_seconds_count{step="handler.execute"} 1');
      expect(text).toContain('dirigent_step_duration_seconds_count{step="evaluator.evaluate"} 1');
      expect(text).toContain('dirigent_model_calls_total{model="mock-model",outcome="ok"} 2');
      expect(text).toContain('dirigent_tool_calls_total{source="ts"} 1');
      // Priced at 1 per 1M tokens each way: the cost is the tokens counted, in millions.
      const tokens = [...text.matchAll(/^dirigent_model_tokens_total\{model="mock-model",kind="\w+"\} (\d+)$/gm)].map((m) => Number(m[1]));
      expect(tokens).toHaveLength(2);
      const cost = Number(/^dirigent_model_cost_total\{model="mock-model"\} (\S+)$/m.exec(text)?.[1]);
      expect(cost).toBeCloseTo((tokens[0]! + tokens[1]!) / 1e6, 9);
      for (const role of ["director", "evaluator", "handler", "compiler", "memory"])
        expect(text).toContain(`dirigent_inflight{role="${role}"} 0`);
      // In-process: no NATS connection, no intake consumer to read.
      expect(text).not.toContain("dirigent_intake_pending");
    } finally {
      await stack.stop();
    }
    await expect(fetch(url ?? "")).rejects.toThrow();
  });

  it("labels a model the configuration does not name `other`; a <model> input that is no model id fails the task", async () => {
    await using stack = await startStack({ config: { metricsPort: 0 }, script: { rules: [], default: { reply: "hi" } } });
    const xml = "<task><description>Say hi.</description><model>{{who}}</model></task>";
    const run = (who: string) => stack.client.run({ xml, inputs: { who } });
    expect(await run("mock-model")).toMatchObject({ status: "COMPLETE" });
    expect(await run("someone-elses-model-7")).toMatchObject({ status: "COMPLETE" });
    const calls = stack.mock.requests.length;
    const bad = await run('gpt-4o"} 1\ndirigent_tasks_total{state="forged');
    expect(bad).toMatchObject({ status: "FAILED", error: { reason: "input_validation_failure" } });
    expect(bad.error?.message).toMatch(/^<model>: "gpt-4o.*forged" is not a model id \(1–200 characters of letters, digits/);
    expect(stack.mock.requests.length).toBe(calls);
    const text = await (await fetch(stack.system.metricsUrl ?? "")).text();
    expect(text).toContain('dirigent_model_calls_total{model="mock-model",outcome="ok"} 1');
    expect(text).toContain('dirigent_model_calls_total{model="other",outcome="ok"} 1');
    expect(text).not.toContain("someone-elses-model-7");
    expect(text).not.toContain("forged");
  });

  it("on NATS: reads the intake queue at each scrape, and counts the connection's reconnects", async () => {
    await using server = await startTestNatsServer();
    await using stack = await startStack({ url: server.url, config: { metricsPort: 0 } });
    const scrape = async () => (await fetch(stack.system.metricsUrl ?? "")).text();
    expect(await scrape()).toMatch(/^dirigent_intake_pending 0$/m);
    expect((await stack.client.run({ xml: "<task><description>hello</description></task>" })).status).toBe("COMPLETE");
    const text = await scrape();
    expect(text).toMatch(/^dirigent_intake_ack_pending 0$/m);
    expect(text).toMatch(/^dirigent_nats_reconnects_total 0$/m);
    await server.restart();
    await pollUntil(
      async () => (/^dirigent_nats_reconnects_total 1$/m.test(await scrape()) ? true : undefined),
      "a reconnect counted",
      15_000,
    );
  });

  it("serves nothing without a port", async () => {
    await using stack = await startStack();
    expect(stack.system.metricsUrl).toBeUndefined();
    // The embedded runtime of a one-shot command asks for none, whatever the configuration says.
    const transport = openMemoryTransport(silentLogger);
    const embedded = await startSystem({ config: { ...stack.config, metricsPort: 0 }, transport, metrics: false });
    expect(embedded.metricsUrl).toBeUndefined();
    await embedded.stop();
    await transport.close();
  });
});
