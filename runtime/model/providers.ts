/**
 * The model servers of a process: the default OpenAI-compatible server (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), and
 * those a task names with `<provider>` (`DIRIGENT_PROVIDERS=name=url,…`, each with the key in
 * `DIRIGENT_PROVIDER_<NAME>_API_KEY`, else `OPENAI_API_KEY`).
 */
import { ModelCallError, type CallModel } from "../../actors/model.js";
import type { Config } from "../config.js";
import { createModelClient, type ModelConfig } from "./openai.js";

type ClientSettings = Pick<
  Config,
  | "modelTimeoutMs"
  | "modelMaxRetries"
  | "modelRetryBaseMs"
  | "modelRetryMaxMs"
  | "modelRetryBudgetMs"
  | "modelHttp"
  | "openaiBaseUrl"
  | "openaiApiKey"
>;

/** The `openai` client settings of the configuration: timeout, retries, base URL and key. */
export function modelClientConfig(config: ClientSettings): ModelConfig {
  return {
    timeoutMs: config.modelTimeoutMs,
    maxRetries: config.modelMaxRetries,
    retryBaseMs: config.modelRetryBaseMs,
    retryMaxMs: config.modelRetryMaxMs,
    retryBudgetMs: config.modelRetryBudgetMs,
    http: config.modelHttp,
    ...(config.openaiBaseUrl ? { baseURL: config.openaiBaseUrl } : {}),
    ...(config.openaiApiKey ? { apiKey: config.openaiApiKey } : {}),
  };
}

/** The variable holding a provider's API key: `DIRIGENT_PROVIDER_<NAME>_API_KEY`. */
export function providerKeyVariable(name: string): string {
  return `DIRIGENT_PROVIDER_${name.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_API_KEY`;
}

/** The API keys of the configured providers, for masking. */
export function providerKeys(config: Pick<Config, "providers">, env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(config.providers).flatMap((name) => {
    const key = env[providerKeyVariable(name)];
    return key ? [key] : [];
  });
}

/**
 * `callModel` for requests without a provider; one client per configured provider for those with one. A provider the
 * configuration does not name fails the call (not retried), naming the ones it does.
 */
export function withProviders(
  callModel: CallModel,
  config: ClientSettings & Pick<Config, "providers">,
  env: NodeJS.ProcessEnv = process.env,
): CallModel {
  const clients = new Map(
    Object.entries(config.providers).map(([name, url]) => {
      const key = env[providerKeyVariable(name)] ?? config.openaiApiKey;
      return [name, createModelClient({ ...modelClientConfig(config), baseURL: url, ...(key ? { apiKey: key } : {}) })] as const;
    }),
  );
  return (request, signal, hooks) => {
    if (request.provider === undefined) return callModel(request, signal, hooks);
    const client = clients.get(request.provider);
    if (client) return client(request, signal, hooks);
    const named = [...clients.keys()];
    const message = `unknown provider '${request.provider}': DIRIGENT_PROVIDERS names ${named.length > 0 ? named.join(", ") : "none"}`;
    return Promise.reject(new ModelCallError(message, 1, undefined));
  };
}
