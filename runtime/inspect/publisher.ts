/**
 * Publishes XState inspection events of this process's actors on `<root>.inspect.<role>.<kind>`: actor creation,
 * events (source and target), snapshots and microsteps, with process, role, task id and a cluster-unique actor id.
 * Contexts and events are sanitised (runtime/inspect/sanitize.ts); a token bucket bounds the rate, dropping events
 * and microsteps beyond it and coalescing snapshots so that every actor's latest state still gets out.
 */
import { hostname } from "node:os";
import type { InspectionEvent } from "xstate";
import type { Bus } from "../../actors/bus.js";
import type { InspectHook, InspectScope } from "../../actors/inspect-option.js";
import type { InspectedSnapshot, InspectMessage } from "../../protocol/inspect.js";
import { inspectKindOf } from "../../protocol/inspect.js";
import type { Subjects, TaskId } from "../../protocol/index.js";
import { SECRET_CONFIG_KEYS, type Config } from "../config.js";
import { secretValues } from "../secrets.js";
import { sanitize, type SanitizeLimits, type SanitizeOptions } from "./sanitize.js";

/** Options of {@link createInspectPublisher}. */
export interface InspectPublisherOptions {
  bus: Bus;
  subjects: Subjects;
  /** Most messages per second (token bucket of this size, refilled continuously). */
  maxPerSec: number;
  /** Share of tasks inspected, chosen by a hash of the task id (0 < sample ≤ 1). Default 1. */
  sample?: number;
  /** This process's name in the messages; default `<host>:<pid>`. */
  process?: string;
  /** Clock in milliseconds (tests). */
  now?: () => number;
  /** Sanitising limits of contexts and events; default small (strings 300, arrays 10, depth 5). */
  limits?: Partial<SanitizeLimits>;
  /** Secret values (the configured API key, NATS password) masked wherever they appear in a message. */
  secrets?: readonly string[];
}

/** A running publisher. */
export interface InspectPublisher {
  /** The hook for {@link ActorDeps.inspect}. */
  readonly hook: InspectHook;
  /** Messages published and dropped so far. */
  stats(): { published: number; dropped: number; pending: number };
  /** Publishes what the throttle holds back (as far as the budget allows) and stops the flush timer. */
  stop(): void;
}

/** The sanitising limits of inspection messages. */
export const INSPECT_LIMITS: SanitizeLimits = { maxString: 300, maxArray: 10, maxDepth: 5 };

const encoder = new TextEncoder();

/** A stable number in [0, 1) from a task id: every process makes the same sampling choice. */
export function samplePoint(taskId: TaskId): number {
  let h = 2166136261;
  for (let i = 0; i < taskId.length; i++) h = Math.imul(h ^ taskId.charCodeAt(i), 16777619);
  return (h >>> 0) / 2 ** 32;
}

interface RefLike {
  sessionId: string;
  id?: string;
  src?: unknown;
  logic?: unknown;
  system?: unknown;
  _parent?: RefLike;
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? Reflect.get(value, key) : undefined;
}

/** Creates the publisher; its {@link InspectPublisher.hook} goes into `ActorDeps.inspect`. */
export function createInspectPublisher(options: InspectPublisherOptions): InspectPublisher {
  const { bus, subjects, maxPerSec } = options;
  const proc = options.process ?? `${hostname()}:${process.pid}`;
  const now = options.now ?? Date.now;
  const sample = options.sample ?? 1;
  const limits: SanitizeOptions = { ...INSPECT_LIMITS, ...options.limits, secrets: options.secrets ?? [] };
  const systems = new WeakMap<object, { no: number; sampled: boolean }>();
  let systemCount = 0;
  let tokens = maxPerSec;
  let refilled = now();
  let published = 0;
  let dropped = 0;
  let unreported = 0;
  const pending = new Map<string, InspectMessage>();
  const described = new WeakMap<object, { machine: string; isMachine: boolean; parentId?: string }>();
  const announced = new WeakSet<object>();
  let timer: NodeJS.Timeout | undefined;

  const take = (): boolean => {
    const t = now();
    tokens = Math.min(maxPerSec, tokens + ((t - refilled) * maxPerSec) / 1000);
    refilled = t;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
  const send = (message: InspectMessage) => {
    if (unreported > 0) {
      message.dropped = unreported;
      unreported = 0;
    }
    try {
      bus.publish(subjects.inspect(message.role, inspectKindOf(message)), encoder.encode(JSON.stringify(message)));
      published++;
    } catch {
      // A closed connection: inspection never disturbs the actors.
    }
  };
  const drop = () => {
    dropped++;
    unreported++;
  };
  const flush = () => {
    timer = undefined;
    for (const [id, message] of pending) {
      if (!take()) break;
      pending.delete(id);
      send(message);
    }
    schedule();
  };
  const schedule = () => {
    if (timer !== undefined || pending.size === 0) return;
    timer = setTimeout(flush, Math.max(10, Math.ceil(1000 / maxPerSec)));
    timer.unref();
  };

  const systemOf = (ref: RefLike, scope: InspectScope) => {
    const key = (ref.system ?? ref) as object;
    let info = systems.get(key);
    if (!info) {
      info = { no: ++systemCount, sampled: sample >= 1 || scope.taskId === undefined || samplePoint(scope.taskId) < sample };
      systems.set(key, info);
    }
    return info;
  };
  const snapshotOf = (snapshot: unknown): InspectedSnapshot => {
    const status = field(snapshot, "status");
    const value = field(snapshot, "value");
    const context = field(snapshot, "context");
    return {
      status: typeof status === "string" ? status : "active",
      ...(value !== undefined ? { value: sanitize(value, limits) } : {}),
      ...(context !== undefined ? { context: sanitize(context, limits) } : {}),
    };
  };

  const hook: InspectHook = (event: InspectionEvent, scope: InspectScope) => {
    try {
      const ref = event.actorRef as unknown as RefLike;
      const system = systemOf(ref, scope);
      if (!system.sampled) return;
      const idOf = (sessionId: string) => `${proc}/${system.no}/${sessionId}`;
      const common = {
        process: proc,
        role: scope.role,
        ...(scope.taskId !== undefined ? { taskId: scope.taskId } : {}),
        actorId: idOf(ref.sessionId),
        rootId: idOf(event.rootId),
        at: now(),
      };
      switch (event.type) {
        case "@xstate.actor": {
          // Announced with its first snapshot: at creation an actor has no state yet.
          const logic = ref.logic;
          const isMachine = typeof field(logic, "id") === "string" && field(logic, "root") !== undefined;
          const machine = isMachine ? String(field(logic, "id")) : typeof ref.src === "string" ? ref.src : (ref.id ?? "actor");
          const parent = ref._parent;
          described.set(ref, { machine, isMachine, ...(parent ? { parentId: idOf(parent.sessionId) } : {}) });
          return;
        }
        case "@xstate.snapshot": {
          const snapshot = snapshotOf(event.snapshot);
          const info = described.get(ref) ?? { machine: ref.id ?? "actor", isMachine: false };
          if (!announced.has(ref)) {
            announced.add(ref);
            // Creation always goes out (taking a token when there is one): the page needs to know every actor.
            take();
            send({ type: "inspect.actor", ...common, ...info, snapshot });
            return;
          }
          const message: InspectMessage = { type: "inspect.snapshot", ...common, ...info, eventType: event.event.type, snapshot };
          pending.delete(common.actorId);
          if (take()) send(message);
          else {
            pending.set(common.actorId, message);
            schedule();
          }
          return;
        }
        case "@xstate.event": {
          if (!take()) return drop();
          const source = event.sourceRef as unknown as RefLike | undefined;
          const sanitized = sanitize(event.event, limits) as Record<string, unknown>;
          send({
            type: "inspect.event",
            ...common,
            ...(source ? { sourceId: idOf(source.sessionId) } : {}),
            event: { ...sanitized, type: event.event.type },
          });
          return;
        }
        case "@xstate.microstep": {
          if (!take()) return drop();
          const transitions = event._transitions.map((t) => ({ source: t.source.id, targets: (t.target ?? []).map((n) => n.id) }));
          send({
            type: "inspect.microstep",
            ...common,
            eventType: event.event.type,
            value: sanitize(field(event.snapshot, "value"), limits),
            transitions,
          });
          return;
        }
        default:
          return;
      }
    } catch {
      // Inspection is best effort; it must never break the actor that is being inspected.
    }
  };

  return {
    hook,
    stats: () => ({ published, dropped, pending: pending.size }),
    stop() {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      for (const [id, message] of pending) {
        if (!take()) break;
        pending.delete(id);
        send(message);
      }
    },
  };
}

/** The configuration's secrets, masked in inspection messages. */
type SecretSettings = Partial<Pick<Config, (typeof SECRET_CONFIG_KEYS)[number] | "natsPasswordFile" | "natsCreds">>;

/** Options of {@link inspectHookFor}: the configuration keys that switch inspection on and bound it, and the secrets. */
export interface InspectSettings extends SecretSettings {
  inspect: boolean;
  inspectMaxPerSec: number;
  inspectSample: number;
}

/** The process's inspection hook when `DIRIGENT_INSPECT` is on; `undefined` (no inspection, no cost) otherwise. */
export function inspectHookFor(config: InspectSettings, bus: Bus, subjects: Subjects): InspectHook | undefined {
  if (!config.inspect) return undefined;
  return createInspectPublisher({
    bus,
    subjects,
    maxPerSec: config.inspectMaxPerSec,
    sample: config.inspectSample,
    secrets: secretValues(config),
  }).hook;
}
