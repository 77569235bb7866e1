/** The model client of the Memory commands and role (`--summarize`, `--llm-match`), configured as the Handler's. */
import { answersOnly, type CallModel } from "../../actors/model.js";
import { createModelClient } from "./openai.js";
import { modelClientConfig } from "./providers.js";
import type { LlmMatchOptions } from "../../actors/memory/llm.js";
import type { Config } from "../config.js";

/** A {@link CallModel} over the `openai` SDK, from `config` (base URL, API key, timeout, retries); a filtered or refused reply is an error. */
export function memoryModelClient(config: Config): CallModel {
  return answersOnly(createModelClient(modelClientConfig(config)));
}

/** The Memory role's model options when `llmMatch` is on, else nothing. */
export function llmMatchOptions(config: Config, callModel?: CallModel): { llm: LlmMatchOptions } | Record<string, never> {
  return config.llmMatch ? { llm: { callModel: callModel ? answersOnly(callModel) : memoryModelClient(config), model: config.model } } : {};
}
