/**
 * The floor under the user-level throughput rows: the model call a dirigent task makes, alone, in the bench process.
 * The request is the one `dirigent up` sent (its messages and tool definitions, as the model server kept it), sent
 * `calls` times `concurrency` at once (a) through the runtime's own model client (runtime/model/openai.ts: the
 * `openai` SDK over its default HTTP client, runtime/model/http1.ts, what the Handler calls) and (b) with Node's `fetch`, as a BullMQ job makes
 * its call. The CPU this process spends per call is what a task of each runtime cannot do without.
 */
import { createModelClient } from "../../../runtime/model/openai.js";
import type { ModelRequest } from "../../../actors/model.js";
import { Semaphore } from "../../../actors/limit.js";

/** CPU of this process per call, µs, for the runtime's model client and for `fetch`. */
export interface FloorSample {
  sdk: number;
  fetch: number;
}

/** Measures one {@link FloorSample} against the model server at `modelUrl` (ending in `/v1`). */
export async function modelCallFloor(modelUrl: string, calls: number, concurrency: number): Promise<FloorSample> {
  const response = await fetch(`${modelUrl}/first-request`);
  if (!response.ok) throw new Error(`the model server kept no request (${response.status})`);
  const body = (await response.json()) as { model: string; messages: ModelRequest["messages"]; tools?: ModelRequest["tools"] };
  const text = JSON.stringify(body);
  const client = createModelClient({ apiKey: "bench", baseURL: modelUrl, timeoutMs: 60_000, maxRetries: 0 });
  const request: ModelRequest = { model: body.model, messages: body.messages, ...(body.tools ? { tools: body.tools } : {}) };
  const viaSdk = () => client(request, new AbortController().signal);
  const viaFetch = async () => {
    const answer = await fetch(`${modelUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer bench" },
      body: text,
    });
    await answer.json();
  };
  const perCall = async (call: () => Promise<unknown>) => {
    await pool(call, Math.min(calls, 500), concurrency); // warm-up
    const before = process.cpuUsage();
    await pool(call, calls, concurrency);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / calls;
  };
  return { sdk: await perCall(viaSdk), fetch: await perCall(viaFetch) };
}

/** Runs `call` `count` times, `concurrency` at once. */
async function pool(call: () => Promise<unknown>, count: number, concurrency: number): Promise<void> {
  const slots = new Semaphore(concurrency);
  await Promise.all(Array.from({ length: count }, () => slots.run(call)));
}
