/**
 * The model of an embedded or demo runtime: the configured one when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is
 * set, otherwise a `dirigent mock-llm` started in this process, so everything works offline.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.js";
import { loadMockScript, startMockLlm } from "./mock-server.js";

/** The demo's mock script, shipped with the package (beside `dist/`; the second path: run from the sources, as tests do). */
export const EXAMPLE_MOCK_SCRIPT = ["../../../examples/mock-script.json", "../../examples/mock-script.json"]
  .map((path) => fileURLToPath(new URL(path, import.meta.url)))
  .reduce((found, path) => (existsSync(found) ? found : path));

/** Returns the config to run with, and a way to stop the mock model if one was started. */
export async function embeddedModel(config: Config): Promise<{ config: Config; note?: string; stop(): Promise<void> }> {
  if (config.openaiApiKey || config.openaiBaseUrl) return { config, stop: async () => undefined };
  const script = await loadMockScript(EXAMPLE_MOCK_SCRIPT);
  const server = await startMockLlm({ port: 0, script });
  return {
    config: { ...config, openaiBaseUrl: server.url, model: config.model },
    note: `no OPENAI_API_KEY or OPENAI_BASE_URL set: answering with the offline mock model at ${server.url}`,
    stop: () => server.close(),
  };
}
