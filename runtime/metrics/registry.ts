/**
 * The metrics of one runtime system on prom-client: one registry per system (two systems in a process keep theirs
 * apart), fed by the actors' metrics seam (actors/metrics.ts), a wrapper of the model client, the NATS connection's
 * reconnects and, at each scrape, the intake consumer's counts.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Metrics } from "../../actors/metrics.js";
import type { CallModel } from "../../actors/model.js";
import { costOf, priceOf } from "../../machines/handler/pricing.js";
import type { Logger } from "../../actors/deps.js";
import { messageOf, ToolCallEventData, type Progress, type Subjects } from "../../protocol/index.js";
import { METRIC_PREFIX, METRICS, STEP_BUCKETS, TASK_BUCKETS } from "./names.js";

/** Per-1M-token prices by model id (`DIRIGENT_MODEL_PRICES`). */
type Prices = Record<string, { input: number; output: number }>;

/** The metrics of one system. */
export interface RuntimeMetrics {
  readonly registry: Registry;
  /** What the actors call (ActorDeps.metrics). */
  readonly seam: Metrics;
  /** `call`, counting its calls, tokens, cost and retries. */
  meterModel(call: CallModel): CallModel;
  /** Counts the reconnects of a NATS connection. */
  watchReconnects(connection: { onReconnect(listener: () => void): () => void }): void;
  /** Reads the intake consumer's counts at each scrape (processes running a Director on NATS). */
  watchIntake(connection: NatsConnection, subjects: Subjects): void;
  /** Stops watching. */
  close(): void;
}

/** The `model` label of a model that is not configured: a task's `<model>` must not make label values without bound. */
export const OTHER_MODEL = "other";

/**
 * Creates the registry and metrics of one system, prom-client's process metrics included (prefixed `dirigent_`).
 * `models`: the configured models, labelled by their id; any other is labelled {@link OTHER_MODEL}.
 */
export function createRuntimeMetrics(options: { prices?: Prices; models?: readonly string[]; log: Logger }): RuntimeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  const registers = [registry];
  const counter = (s: Parameters<typeof spec>[0]) => new Counter({ ...spec(s), registers });
  const tasks = counter(METRICS.tasks);
  const taskDuration = new Histogram({ ...spec(METRICS.taskDuration), buckets: [...TASK_BUCKETS], registers });
  const stepDuration = new Histogram({ ...spec(METRICS.stepDuration), buckets: [...STEP_BUCKETS], registers });
  const modelCalls = counter(METRICS.modelCalls);
  const modelTokens = counter(METRICS.modelTokens);
  const modelCost = counter(METRICS.modelCost);
  const modelRetries = counter(METRICS.modelRetries);
  const toolCalls = counter(METRICS.toolCalls);
  const natsReconnects = counter(METRICS.natsReconnects);
  const inflightSources = new Map<string, Array<() => number>>();
  new Gauge({
    ...spec(METRICS.inflight),
    registers,
    collect() {
      this.reset();
      for (const [role, counts] of inflightSources)
        this.set(
          { role },
          counts.reduce((sum, count) => sum + count(), 0),
        );
    },
  });
  const stops: Array<() => void> = [];
  const prices = options.prices ?? {};
  const known: ReadonlySet<string> = new Set([...(options.models ?? []), ...Object.keys(prices)]);

  const seam: Metrics = {
    taskEnded({ state, type, seconds }) {
      tasks.inc({ state, type });
      taskDuration.observe({ state }, seconds);
    },
    progress(progress: Progress) {
      if (progress.event !== "tool.call") return;
      const data = ToolCallEventData.safeParse(progress.data);
      if (data.success) toolCalls.inc({ source: data.data.source ?? "none" });
    },
    step(step, seconds) {
      stepDuration.observe({ step }, seconds);
    },
    inflight(role, count) {
      inflightSources.set(role, [...(inflightSources.get(role) ?? []), count]);
    },
  };

  return {
    registry,
    seam,
    meterModel: (call) => async (request, signal, hooks) => {
      const model = known.has(request.model) ? request.model : OTHER_MODEL;
      const failed = (err: unknown): never => {
        modelCalls.inc({ model, outcome: signal.aborted ? "aborted" : "error" });
        throw err;
      };
      // Promise callbacks, not an await in a try: a frame suspended here would be held for as long as the model takes.
      let calling: ReturnType<typeof call>;
      try {
        calling = call(request, signal, {
          ...hooks,
          onRetry: (info) => {
            modelRetries.inc({ model });
            hooks?.onRetry?.(info);
          },
        });
      } catch (err) {
        return failed(err);
      }
      return calling.then((reply) => {
        try {
          return metered(reply);
        } catch (err) {
          return failed(err);
        }
      }, failed);
      function metered(reply: Awaited<typeof calling>) {
        modelCalls.inc({ model, outcome: "ok" });
        modelTokens.inc({ model, kind: "prompt" }, reply.usage.promptTokens);
        modelTokens.inc({ model, kind: "completion" }, reply.usage.completionTokens);
        // Servers answer with a dated id: the requested one is the fallback key, as in the Handler's usage notes.
        const cost = costOf(reply.usage, priceOf(prices, reply.model, request.model));
        if (cost !== undefined) modelCost.inc({ model }, cost);
        return reply;
      }
    },
    watchReconnects(connection) {
      stops.push(connection.onReconnect(() => natsReconnects.inc()));
    },
    watchIntake(connection, subjects) {
      // One consumer info per scrape, shared by the three gauges (prom-client awaits each gauge's collect); a failed
      // one leaves the last values.
      let reading: Promise<void> | undefined;
      const read = () =>
        (reading ??= (async () => {
          try {
            const jsm = await jetstreamManager(connection, { timeout: 2000 });
            const info = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
            pending.set(info.num_pending);
            ackPending.set(info.num_ack_pending);
            redelivered.set(info.num_redelivered);
          } catch (err) {
            options.log.debug({ err: messageOf(err) }, "intake consumer info for metrics failed");
          } finally {
            reading = undefined;
          }
        })());
      const pending = new Gauge({ ...spec(METRICS.intakePending), registers, collect: read });
      const ackPending = new Gauge({ ...spec(METRICS.intakeAckPending), registers, collect: read });
      const redelivered = new Gauge({ ...spec(METRICS.intakeRedelivered), registers, collect: read });
    },
    close() {
      for (const stop of stops.splice(0)) stop();
    },
  };
}

const spec = (s: { name: string; help: string; labels: readonly string[] }) => ({ name: s.name, help: s.help, labelNames: [...s.labels] });
