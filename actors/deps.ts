/**
 * What every actor shell is built from. The runtime passes these in; nothing here is a module-level singleton.
 */
import type { Subjects } from "../protocol/index.js";
import type { InspectHook } from "./inspect-option.js";
import type { Bus } from "./bus.js";
import type { LocalResponders } from "./local.js";
import type { Metrics } from "./metrics.js";

/** The logging calls actors make (a subset of pino's API). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Dependencies shared by all actor shells. */
export interface ActorDeps {
  /** The transport. */
  bus: Bus;
  /** Subjects of this deployment. */
  subjects: Subjects;
  /** Structured logger. */
  log: Logger;
  /** Current time (injected so tests can control it). */
  now(): Date;
  /** Makes a new unique id (task ids, message ids). */
  newId(): string;
  /** XState inspection of every actor the shells create (`DIRIGENT_INSPECT=on`); absent: no inspection, no cost. */
  inspect?: InspectHook | undefined;
  /** The responders of the roles in this process, for local dispatch (actors/local.ts); absent: every request goes over the bus. */
  local?: LocalResponders | undefined;
  /** Record prompts, completions and tool arguments in trace spans (`DIRIGENT_TRACE_CONTENT=on`, docs/traces.md). */
  traceContent?: boolean | undefined;
  /** Metrics of this process (actors/metrics.ts); absent: none recorded. */
  metrics?: Metrics | undefined;
}

/** A started actor shell. */
export interface RoleHandle {
  /** The role's name. */
  readonly role: string;
  /** Stops taking new work, waits for subscriptions to close, stops the actors. */
  stop(): Promise<void>;
}

/** A logger that drops everything (tests, library users without logging). */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** Message of an unknown thrown value (declared in protocol/errors.ts, the lowest layer, for every layer to use). */
export { messageOf } from "../protocol/errors.js";
