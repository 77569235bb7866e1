/**
 * In-process {@link IndexStore} for the embedded single-process mode and tests: the same atomic-replace and watch
 * semantics as the JetStream one, nothing durable.
 */
import { randomBytes } from "node:crypto";
import {
  checkEntries,
  IndexConflictError,
  type IndexEntry,
  type IndexSnapshot,
  type IndexStore,
  type IndexWatch,
  type UpdateIndexOptions,
} from "../../actors/memory/index-store.js";

/** A new generation id: sortable by time, unique across processes, a valid KV key token. */
export function newGeneration(): string {
  return `${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

/** {@link IndexStore} held in this process. */
export class InMemoryIndexStore implements IndexStore {
  readonly durable = false;
  #snapshot: IndexSnapshot = { generation: "", entries: [] };
  readonly #watchers = new Set<(generation: string) => void>();

  async getGlobalIndex(): Promise<IndexSnapshot> {
    return this.#snapshot;
  }

  async updateGlobalIndex(entries: readonly IndexEntry[], options: UpdateIndexOptions = {}): Promise<string> {
    checkEntries(entries);
    const current = this.#snapshot.generation;
    if (options.ifGeneration !== undefined && options.ifGeneration !== current) throw new IndexConflictError(options.ifGeneration, current);
    const generation = newGeneration();
    this.#snapshot = { generation, entries: entries.map((e) => ({ ...e })) };
    for (const watcher of this.#watchers) queueMicrotask(() => watcher(generation));
    return generation;
  }

  async watch(onGeneration: (generation: string) => void): Promise<IndexWatch> {
    this.#watchers.add(onGeneration);
    const current = this.#snapshot.generation;
    queueMicrotask(() => onGeneration(current));
    return {
      stop: async () => {
        this.#watchers.delete(onGeneration);
      },
    };
  }
}
