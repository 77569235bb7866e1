/** The metrics of a runtime system, when `DIRIGENT_METRICS_PORT` / `--metrics-port` asks for them. */
import type { Logger } from "../../actors/deps.js";
import type { Subjects } from "../../protocol/index.js";
import type { Config } from "../config.js";
import { NatsBus } from "../nats/bus.js";
import type { Bus } from "../../actors/bus.js";
import { createRuntimeMetrics, type RuntimeMetrics } from "./registry.js";
import { startMetricsServer } from "./server.js";

/** The metrics of a running system and their endpoint. */
export interface SystemMetrics {
  readonly metrics: RuntimeMetrics;
  /** Where Prometheus scrapes them. */
  readonly url: string;
  stop(): Promise<void>;
}

/** Starts the metrics and their endpoint; none when no port is configured. */
export async function startSystemMetrics(
  config: Config,
  context: { bus: Bus; subjects: Subjects; roles: readonly string[]; log: Logger },
): Promise<SystemMetrics | undefined> {
  if (config.metricsPort === undefined) return undefined;
  // Labelled by their id: the models the configuration names (default, cheap tier, priced); any other is `other`.
  const models = [config.model, ...(config.cheapModel === undefined ? [] : [config.cheapModel])];
  const metrics = createRuntimeMetrics({ prices: config.modelPrices, models, log: context.log });
  const { bus } = context;
  if (bus instanceof NatsBus) {
    metrics.watchReconnects(bus);
    if (context.roles.includes("director")) metrics.watchIntake(bus.connection, context.subjects);
  }
  const server = await startMetricsServer(metrics.registry, config.metricsHost, config.metricsPort, context.log);
  return {
    metrics,
    url: server.url,
    stop: async () => {
      metrics.close();
      await server.close();
    },
  };
}
