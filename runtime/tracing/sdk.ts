/**
 * OpenTelemetry traces of a process (docs/traces.md): the OpenTelemetry Node SDK, started only when an OTLP endpoint
 * is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), configured by the standard
 * `OTEL_*` variables (protocol, headers, sampler, batch delays, resource attributes). Without an endpoint the SDK is
 * not even loaded: the actors' spans (actors/tracing.ts) go to the API's no-op tracer. Traces only: the SDK's metrics
 * and logs stay off.
 */

import { createMasker } from "../../actors/secrets.js";
import { maskingSpanProcessor } from "./masking.js";

/** A started tracing SDK. */
export interface Tracing {
  /** The service name spans are exported under. */
  readonly serviceName: string;
  /** Exports the spans still buffered and stops. */
  shutdown(): Promise<void>;
}

/** `DIRIGENT_TRACE_CONTENT`: record prompts, completions and tool arguments in spans (off by default). */
export const TRACE_CONTENT_ENV = "DIRIGENT_TRACE_CONTENT";

const set = (value: string | undefined): boolean => value !== undefined && value.trim() !== "";

/** Whether `env` asks for traces: an OTLP endpoint is set, and neither the SDK nor the traces exporter is turned off. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (!set(env.OTEL_EXPORTER_OTLP_ENDPOINT) && !set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) return false;
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  return !(env.OTEL_TRACES_EXPORTER ?? "").split(",").some((name) => name.trim() === "none");
}

/** Whether `env` opts in to prompts and completions in spans ({@link TRACE_CONTENT_ENV}: on, true, 1). */
export function traceContentWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  return ["on", "true", "1", "yes"].includes((env[TRACE_CONTENT_ENV] ?? "").trim().toLowerCase());
}

/**
 * Starts exporting this process's spans when {@link tracingWanted}; `undefined` otherwise. The service name is
 * `OTEL_SERVICE_NAME`, else `name` (`dirigent-handler` for a Handler worker). Every field of every span is masked of
 * `secrets` before it is exported (runtime/tracing/masking.ts).
 */
export async function startTracing(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  secrets: readonly string[] = [],
): Promise<Tracing | undefined> {
  if (!tracingWanted(env)) return undefined;
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  // The SDK's own reading of the environment, which it does when given no processors: the exporters of
  // `OTEL_TRACES_EXPORTER`, their protocol (`OTEL_EXPORTER_OTLP_PROTOCOL`: http/protobuf by default, http/json, grpc)
  // and batching (`OTEL_BSP_*`), as in any OpenTelemetry SDK. Not part of its public API: pinned by package-lock.json
  // and checked by test/unit/tracing.test.ts.
  const { getSpanProcessorsFromEnv } = await import("@opentelemetry/sdk-node/build/src/utils.js");
  const mask = createMasker(secrets);
  const serviceName = set(env.OTEL_SERVICE_NAME) ? (env.OTEL_SERVICE_NAME as string) : name;
  const spanProcessors = getSpanProcessorsFromEnv(undefined).map((p) => maskingSpanProcessor(p, mask));
  const sdk = new NodeSDK({ serviceName, spanProcessors, metricReaders: [], logRecordProcessors: [], instrumentations: [] });
  sdk.start();
  return { serviceName, shutdown: () => sdk.shutdown() };
}
