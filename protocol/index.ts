/**
 * The dirigent wire contract: message schemas (with inferred types), subjects, codec and errors.
 * Depends on zod only, so any service can use it without NATS or XState.
 */
export * from "./ids.js";
export * from "./errors.js";
export * from "./codec.js";
export * from "./result.js";
export * from "./tasks.js";
export * from "./evaluator.js";
export * from "./continuation.js";
export * from "./handler.js";
export * from "./records.js";
export * from "./node-records.js";
export * from "./memory.js";
export * from "./control.js";
export * from "./compiler.js";
export * from "./checkmate.js";
export * from "./goals.js";
export * from "./health.js";
export * from "./subjects.js";
export * from "./requests.js";
export * from "./tool-selection.js";
export * from "./map-events.js";
export * from "./fork.js";
export * from "./rerun.js";
