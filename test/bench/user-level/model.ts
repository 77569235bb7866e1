/**
 * The model of the user-level bench: model-server.mjs in its own process, and the model's own round trip as a
 * client sees it (one `openai` SDK client in the bench process, one call at a time), the time a task cannot beat.
 */
import OpenAI from "openai";
import { here, startNode, type Child } from "./processes.js";

/** The running model server. */
export interface ModelServer {
  /** Base URL for the SDK's `baseURL`, ending in `/v1`. */
  readonly url: string;
  readonly child: Child;
  /** One chat completion through the `openai` SDK from this process; ms. */
  roundTrip(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts model-server.mjs. */
export async function startModelServer(): Promise<ModelServer> {
  const { child, match } = await startNode(here("model-server.mjs"), [], {}, /listening (\d+)/);
  const url = `http://127.0.0.1:${match[1]}/v1`;
  const client = new OpenAI({ baseURL: url, apiKey: "bench", maxRetries: 0 });
  return {
    url,
    child,
    async roundTrip() {
      const start = performance.now();
      await client.chat.completions.create({ model: "bench-model", messages: [{ role: "user", content: "Answer with the word ok." }] });
      return performance.now() - start;
    },
    stop: () => child.stop(),
  };
}
