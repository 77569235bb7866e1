/**
 * Goals and Supervisor leases in one key/value bucket (`<ROOT>_GOALS`): `goal.<id>` holds the {@link Goal},
 * `lease.<id>` which Supervisor runs it and until when. Every write is a compare-and-set, so two processes never
 * both advance a goal, and a lease is taken over only once it has expired.
 */
import { z } from "zod";
import { decodeJson, encodeJson, Goal, validate } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";

/** A {@link TaskStore} that can list its keys (a JetStream KV bucket, or memory). */
export interface KeyedStore extends TaskStore {
  keys(filter?: string): Promise<string[]>;
}

/** A Supervisor's hold on a goal. `until`: milliseconds since the epoch. */
export const Lease = z.object({ owner: z.string(), until: z.number().int() });
export type Lease = z.infer<typeof Lease>;

/** A goal with the revision its next write compares. */
export interface StoredGoal {
  goal: Goal;
  revision: number;
}

const goalKey = (id: string) => `goal.${id}`;
const leaseKey = (id: string) => `lease.${id}`;

function parse<T extends z.ZodType>(schema: T, bytes: Uint8Array, key: string): z.infer<T> {
  const json = decodeJson(bytes);
  const value = json.ok ? validate(schema, json.value) : json;
  if (!value.ok) throw new Error(`goals bucket: '${key}' is not valid: ${value.error.message}`);
  return value.value;
}

/** The goals bucket. */
export class GoalStore {
  constructor(readonly kv: KeyedStore) {}

  /** Stores a new goal; `exists` when its id is taken. */
  create(goal: Goal): Promise<"created" | "exists"> {
    return this.kv.create(goalKey(goal.id), encodeJson(goal));
  }

  async get(id: string): Promise<StoredGoal | undefined> {
    const entry = await this.kv.getWithRevision(goalKey(id));
    return entry && { goal: parse(Goal, entry.value, goalKey(id)), revision: entry.revision };
  }

  /** Compare-and-set: the new revision, or `undefined` when the goal changed since `revision`. */
  update(goal: Goal, revision: number): Promise<number | undefined> {
    return this.kv.update(goalKey(goal.id), encodeJson(goal), revision);
  }

  /**
   * Changes a goal with `change` until the compare-and-set holds (another writer may come first).
   * `change` returns `undefined` to leave it as it is. Resolves with the goal as stored, or `undefined` if absent.
   */
  async modify(id: string, change: (goal: Goal) => Goal | undefined): Promise<{ goal: Goal; changed: boolean } | undefined> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const stored = await this.get(id);
      if (!stored) return undefined;
      const next = change(stored.goal);
      if (next === undefined) return { goal: stored.goal, changed: false };
      if ((await this.update(next, stored.revision)) !== undefined) return { goal: next, changed: true };
    }
    throw new Error(`goal '${id}' kept changing; gave up after 20 attempts`);
  }

  /** Every goal, by priority then age. Goals that do not parse are skipped and reported to `onBad`. */
  async list(onBad: (key: string, err: unknown) => void = () => undefined): Promise<Goal[]> {
    const keys = (await this.kv.keys()).filter((k) => k.startsWith("goal."));
    const goals: Goal[] = [];
    await Promise.all(
      keys.map(async (key) => {
        try {
          const stored = await this.get(key.slice("goal.".length));
          if (stored) goals.push(stored.goal);
        } catch (err) {
          onBad(key, err);
        }
      }),
    );
    return goals.sort((a, b) => a.priority - b.priority || a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /** The current lease of a goal. */
  async lease(id: string): Promise<{ lease: Lease; revision: number } | undefined> {
    const entry = await this.kv.getWithRevision(leaseKey(id));
    return entry && { lease: parse(Lease, entry.value, leaseKey(id)), revision: entry.revision };
  }

  /** Whether `owner` may take the goal at `now`: no lease, an expired one, or its own. */
  async leaseFree(id: string, owner: string, now: number): Promise<boolean> {
    const held = await this.lease(id);
    return !held || held.lease.owner === owner || held.lease.until <= now;
  }

  /**
   * Takes or renews the lease for `ttlMs` from `now`. Fails (false) when another owner holds an unexpired lease
   * or wrote it first.
   */
  async acquire(id: string, owner: string, now: number, ttlMs: number): Promise<boolean> {
    const value = encodeJson({ owner, until: now + ttlMs } satisfies Lease);
    const held = await this.lease(id);
    if (!held) return (await this.kv.create(leaseKey(id), value)) === "created";
    if (held.lease.owner !== owner && held.lease.until > now) return false;
    return (await this.kv.update(leaseKey(id), value, held.revision)) !== undefined;
  }

  /** Gives the lease up (only if `owner` still holds it), so another Supervisor may take the goal at once. */
  async release(id: string, owner: string): Promise<void> {
    const held = await this.lease(id);
    if (held?.lease.owner === owner) await this.kv.update(leaseKey(id), encodeJson({ owner, until: 0 } satisfies Lease), held.revision);
  }
}
