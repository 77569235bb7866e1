/**
 * The seam between the Memory role and wherever the global file-metadata index is kept. `runtime/` implements
 * it over a JetStream KV bucket (shared by every process) and in memory (the in-process mode).
 */
import type { IndexEntry } from "../../machines/memory/memory.js";
import { MAX_IDENTIFIERS_CHARS } from "../../protocol/index.js";

export type { IndexEntry } from "../../machines/memory/memory.js";

/** One complete generation of the index. */
export interface IndexSnapshot {
  /** Id of the generation; `""` when nothing was ever written. */
  readonly generation: string;
  /** Every entry, absolute path → metadata. */
  readonly entries: readonly IndexEntry[];
}

/** A live watch of the index; `stop` ends it. */
export interface IndexWatch {
  stop(): Promise<void>;
}

/**
 * The global index that associative matching reads: absolute path → free-text metadata, never file contents.
 * Readers never see a half-written generation.
 */
export interface IndexStore {
  /** Reads the current generation, whole. */
  getGlobalIndex(): Promise<IndexSnapshot>;
  /**
   * Replaces the whole index atomically: the new generation becomes visible at once, the old one is removed.
   * With `ifGeneration`, only if that generation is still the current one (`""`: no index yet): a writer that
   * merged its entries into a generation it read learns that another writer replaced it.
   * @returns the new generation id.
   * @throws {TypeError} naming the first path that is not absolute.
   * @throws {IndexConflictError} when `ifGeneration` is given and is no longer current; nothing was replaced.
   */
  updateGlobalIndex(entries: readonly IndexEntry[], options?: UpdateIndexOptions): Promise<string>;
  /**
   * Calls `onGeneration` with the current generation id, then with each new one, whoever wrote it.
   * The callback may see the same id twice; callers compare.
   */
  watch(onGeneration: (generation: string) => void): Promise<IndexWatch>;
  /** Whether the index survives the process. */
  readonly durable: boolean;
}

/** Options of {@link IndexStore.updateGlobalIndex}. */
export interface UpdateIndexOptions {
  /** Replace the index only while this generation is current (`""`: while there is none). */
  ifGeneration?: string;
}

/** A conditional index write found another generation current than the one it was based on. */
export class IndexConflictError extends Error {
  override name = "IndexConflictError";
  constructor(
    /** The generation the write was based on. */
    readonly expected: string,
    /** The generation current instead. */
    readonly actual: string,
  ) {
    super(`index generation '${expected || "(none)"}' was replaced by '${actual || "(none)"}' before this write`);
  }
}

/** An index store that is always empty and refuses writes: the Memory role when no store is given. */
export const emptyIndexStore: IndexStore = {
  durable: false,
  getGlobalIndex: async () => ({ generation: "", entries: [] }),
  updateGlobalIndex: async () => {
    throw new Error("this Memory role has no index store to write to");
  },
  watch: async (onGeneration) => {
    onGeneration("");
    return { stop: async () => undefined };
  },
};

/** Checks that every path is absolute (POSIX or Windows drive form) and unique, and that no identifiers field is too long. */
export function checkEntries(entries: readonly IndexEntry[]): void {
  const seen = new Set<string>();
  for (const entry of entries) {
    if (!entry.path.startsWith("/") && !/^[A-Za-z]:[\\/]/.test(entry.path)) {
      throw new TypeError(`index path '${entry.path}' is not absolute`);
    }
    if (seen.has(entry.path)) throw new TypeError(`index path '${entry.path}' appears twice`);
    if ((entry.identifiers?.length ?? 0) > MAX_IDENTIFIERS_CHARS)
      throw new TypeError(`the identifiers of '${entry.path}' exceed ${MAX_IDENTIFIERS_CHARS} characters`);
    seen.add(entry.path);
  }
}
