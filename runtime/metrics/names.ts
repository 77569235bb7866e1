/**
 * The metrics of a runtime process: names, types, labels and help, in one place (the registry, the tests and
 * docs/operations.md follow it). Names follow Prometheus conventions: base units, `_total` on counters.
 */

/** One metric of dirigent's own (prom-client's process metrics, `dirigent_process_*` and `dirigent_nodejs_*`, come besides). */
export interface MetricSpec {
  readonly name: string;
  readonly type: "counter" | "gauge" | "histogram";
  readonly labels: readonly string[];
  readonly help: string;
}

/** Prefix of every metric, prom-client's default metrics included. */
export const METRIC_PREFIX = "dirigent_";

/** Buckets of task durations (seconds): tasks run from a second to the task timeout (10 min by default) and beyond. */
export const TASK_BUCKETS: readonly number[] = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
/** Buckets of step durations (seconds): one model session, script, evaluation or match. */
export const STEP_BUCKETS: readonly number[] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** dirigent's own metrics, by key. */
export const METRICS = {
  tasks: {
    name: "dirigent_tasks_total",
    type: "counter",
    labels: ["state", "type"],
    help: "Tasks ended by this process's Director, by final state (completed, failed, cancelled) and entry task type.",
  },
  taskDuration: {
    name: "dirigent_task_duration_seconds",
    type: "histogram",
    labels: ["state"],
    help: "Time from a task's submission to its end, by final state.",
  },
  stepDuration: {
    name: "dirigent_step_duration_seconds",
    type: "histogram",
    labels: ["step"],
    help: "Time a role of this process took to serve one request (handler.execute: a model session; handler.script; evaluator.evaluate; memory.match; compiler.compile).",
  },
  modelCalls: {
    name: "dirigent_model_calls_total",
    type: "counter",
    labels: ["model", "outcome"],
    help: "Model calls (chat completions, retries included in one call), by requested model and outcome (ok, error, aborted).",
  },
  modelTokens: {
    name: "dirigent_model_tokens_total",
    type: "counter",
    labels: ["model", "kind"],
    help: "Tokens of answered model calls, by model and kind (prompt, completion).",
  },
  modelCost: {
    name: "dirigent_model_cost_total",
    type: "counter",
    labels: ["model"],
    help: "Cost of answered model calls in the unit of DIRIGENT_MODEL_PRICES (USD per 1M tokens); models without a price add nothing.",
  },
  modelRetries: {
    name: "dirigent_model_retries_total",
    type: "counter",
    labels: ["model"],
    help: "Retries of model requests (connection errors, timeouts, 408, 409, 429, 5xx).",
  },
  toolCalls: {
    name: "dirigent_tool_calls_total",
    type: "counter",
    labels: ["source"],
    help: "Tool calls of Handler sessions, by source (builtin, mcp, a2a, ts, nats, template, continuation; none: a malformed call).",
  },
  inflight: {
    name: "dirigent_inflight",
    type: "gauge",
    labels: ["role"],
    help: "Work running now in this process, by role (director: tasks; others: requests being served).",
  },
  intakePending: {
    name: "dirigent_intake_pending",
    type: "gauge",
    labels: [],
    help: "Tasks waiting in the intake queue, not delivered to any Director yet (processes running a Director).",
  },
  intakeAckPending: {
    name: "dirigent_intake_ack_pending",
    type: "gauge",
    labels: [],
    help: "Tasks delivered to a Director and not finished (acknowledged) yet.",
  },
  intakeRedelivered: {
    name: "dirigent_intake_redelivered",
    type: "gauge",
    labels: [],
    help: "Tasks of the intake queue delivered more than once and not finished yet (a Director died or stopped signalling).",
  },
  natsReconnects: {
    name: "dirigent_nats_reconnects_total",
    type: "counter",
    labels: [],
    help: "Reconnects of this process's NATS connection.",
  },
} as const satisfies Record<string, MetricSpec>;
