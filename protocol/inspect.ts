/**
 * Inspection messages: what every process publishes on `<root>.inspect.<role>.<kind>` about its XState actors
 * (when `DIRIGENT_INSPECT=on`), and what `dirigent inspect` reads. Contexts and events in them are sanitised by the
 * publisher: secrets masked, large values cut.
 */
import { z } from "zod";

/** The roles an inspected actor can belong to. */
export const InspectRole = z.enum(["director", "evaluator", "handler", "memory", "compiler", "supervisor", "client"]);
export type InspectRole = z.infer<typeof InspectRole>;

/** The kinds of inspection message, also the last token of their subject. */
export const INSPECT_KINDS = ["actor", "event", "snapshot", "microstep"] as const;
export type InspectKind = (typeof INSPECT_KINDS)[number];

/** An actor's state as published: the machine's state value, its status and its sanitised context. */
export const InspectedSnapshot = z.object({
  /** `active`, `done`, `error` or `stopped`. */
  status: z.string(),
  /** The machine's state value (`"queued"`, `{ "running": "executing" }`); absent for non-machine actors. */
  value: z.unknown().optional(),
  /** The sanitised context. */
  context: z.unknown().optional(),
});
export type InspectedSnapshot = z.infer<typeof InspectedSnapshot>;

const base = {
  /** The publishing process: `<host>:<pid>`. */
  process: z.string(),
  /** The role whose shell created the actor. */
  role: InspectRole,
  /** The task the actor works on, when it works on one. */
  taskId: z.string().optional(),
  /** The actor, unique in the cluster: `<process>/<system>/<session id>`. */
  actorId: z.string(),
  /** The root actor of its actor system (equal to `actorId` for a root). */
  rootId: z.string(),
  /** Publisher time, milliseconds since the epoch. */
  at: z.number(),
  /** Messages this process dropped (throttling) since its previous message. */
  dropped: z.number().int().nonnegative().optional(),
};

/** An actor was created. */
export const InspectActor = z.object({
  type: z.literal("inspect.actor"),
  ...base,
  /** The parent actor, for an invoked or spawned one. */
  parentId: z.string().optional(),
  /** The machine's id (`task`, `evaluation`, …), or the invoked source's name (`evaluate`) for other logic. */
  machine: z.string(),
  /** Whether the logic is a state machine (then {@link InspectActor.machine} names its chart). */
  isMachine: z.boolean(),
  snapshot: InspectedSnapshot,
});
export type InspectActor = z.infer<typeof InspectActor>;

/** An event was delivered to an actor. */
export const InspectEvent = z.object({
  type: z.literal("inspect.event"),
  ...base,
  /** The sender, when it was an actor. */
  sourceId: z.string().optional(),
  /** The sanitised event; `type` always kept. */
  event: z.object({ type: z.string() }).catchall(z.unknown()),
});
export type InspectEvent = z.infer<typeof InspectEvent>;

/** An actor's snapshot changed. */
export const InspectSnapshot = z.object({
  type: z.literal("inspect.snapshot"),
  ...base,
  /** As in {@link InspectActor}, so that an inspector started later still learns the actor. */
  parentId: z.string().optional(),
  machine: z.string(),
  isMachine: z.boolean(),
  /** The type of the event that caused it. */
  eventType: z.string(),
  snapshot: InspectedSnapshot,
});
export type InspectSnapshot = z.infer<typeof InspectSnapshot>;

/** One microstep of a machine: the transitions taken for an event. */
export const InspectMicrostep = z.object({
  type: z.literal("inspect.microstep"),
  ...base,
  /** The event. */
  eventType: z.string(),
  /** The state value after the microstep. */
  value: z.unknown(),
  /** Each transition taken: the state it is declared on and its targets (state node ids). */
  transitions: z.array(z.object({ source: z.string(), targets: z.array(z.string()) })),
});
export type InspectMicrostep = z.infer<typeof InspectMicrostep>;

/** Any inspection message. */
export const InspectMessage = z.discriminatedUnion("type", [InspectActor, InspectEvent, InspectSnapshot, InspectMicrostep]);
export type InspectMessage = z.infer<typeof InspectMessage>;

/** The subject kind of a message (`inspect.actor` → `actor`). */
export function inspectKindOf(message: InspectMessage): InspectKind {
  return message.type.slice("inspect.".length) as InspectKind;
}
