/**
 * The Memory role: serves `<root>.memory.match` (queue group `memory`) from one {@link memoryMachine} actor,
 * over the global index of an {@link IndexStore}. It watches the store and loads each new generation, whichever
 * process wrote it.
 */
import { createActor, fromPromise, waitFor } from "xstate";
import { memoryMachine, type LoadedIndex } from "../../machines/memory/memory.js";
import { Requests, type MatchReply } from "../../protocol/index.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { inspectOption } from "../inspect-option.js";
import { emptyIndexStore, type IndexStore } from "./index-store.js";
import { chooseWithModel, describeCount, LLM_CANDIDATES, type LlmMatchOptions } from "./llm.js";
import { DEFAULT_MATCH_LIMIT, IndexRanker, queryText, toFileMatch } from "./rank.js";
import { RemoteError } from "../ask.js";
import { serve } from "../serve.js";

/** Options of {@link startMemory}. */
export interface MemoryOptions {
  /** Match requests handled at once. */
  concurrency: number;
  /** Where the index lives; without one the role serves an empty index. */
  store?: IndexStore;
  /** Matches per reply. Default {@link DEFAULT_MATCH_LIMIT}. */
  limit?: number;
  /** When given, the model chooses among MiniSearch's best candidates (`--llm-match`). */
  llm?: LlmMatchOptions;
}

/** A started Memory role. */
export interface MemoryHandle extends RoleHandle {
  /** Resolves once the role serves `generation` (or a later one it was told about). */
  serving(generation: string, timeoutMs?: number): Promise<void>;
}

/** Starts the Memory role. */
export function startMemory(deps: ActorDeps, options: MemoryOptions): MemoryHandle {
  const store = options.store ?? emptyIndexStore;
  const limit = options.limit ?? DEFAULT_MATCH_LIMIT;
  const pending = new Map<string, { resolve: (reply: MatchReply) => void; reject: (err: Error) => void }>();
  let stopping = false;
  const stopped = new AbortController();
  let ranker = new IndexRanker([]);
  const actor = createActor(
    memoryMachine.provide({
      actors: {
        loadIndex: fromPromise<LoadedIndex, { generation: string | null }>(async () => {
          const snapshot = await store.getGlobalIndex();
          ranker = await IndexRanker.build(snapshot.entries);
          deps.log.info({ generation: snapshot.generation, entries: snapshot.entries.length }, "index loaded");
          return { generation: snapshot.generation, entries: snapshot.entries.length };
        }),
      },
      actions: {
        answer: (_, { request }) => {
          const reply = pending.get(request.requestId);
          pending.delete(request.requestId);
          if (reply === undefined) return;
          const query = queryText(request);
          if (options.llm === undefined) {
            const matches = ranker.match(query, limit);
            reply.resolve({ type: "memory.matched", context: describeCount(matches.length, ranker.size), matches });
            return;
          }
          // The ranking of the generation in service now; the model's answer comes later.
          const candidates = ranker.rank(query, Math.max(limit, options.llm.candidates ?? LLM_CANDIDATES));
          const fallback = candidates.slice(0, limit).map(toFileMatch);
          chooseWithModel(request, candidates, fallback, { ...options.llm, limit, total: ranker.size, signal: stopped.signal }).then(
            ({ context, matches }) => reply.resolve({ type: "memory.matched", context, matches }),
            reply.reject,
          );
        },
        loadFailed: (_, { error }) => deps.log.error({ err: messageOf(error) }, "loading the index failed"),
      },
    }),
    { ...inspectOption(deps, "memory"), input: {} },
  ).start();
  const watch = store
    .watch((generation) => actor.send({ type: "index.changed", generation }))
    .catch((err: unknown) => {
      deps.log.error({ err: messageOf(err) }, "watching the index failed; serving the index loaded at start");
      return undefined;
    });
  const subscription = serve(deps, Requests.memoryMatch, {
    queue: deps.subjects.queue("memory"),
    concurrency: options.concurrency,
    local: true,
    handle: (request) =>
      new Promise<MatchReply>((resolve, reject) => {
        if (stopping) throw new RemoteError("UNAVAILABLE", "the Memory role is stopping");
        const requestId = deps.newId();
        pending.set(requestId, { resolve, reject });
        actor.send({ ...request, requestId });
      }),
  });
  return {
    role: "memory",
    async serving(generation, timeoutMs = 10_000) {
      await waitFor(actor, (s) => s.context.generation === generation, { timeout: timeoutMs });
    },
    async stop() {
      stopping = true;
      stopped.abort(new Error("the Memory role stopped"));
      await (await watch)?.stop();
      // Requests held while an index loads would otherwise keep the subscription from closing.
      for (const { reject } of pending.values())
        reject(new RemoteError("UNAVAILABLE", "the Memory role stopped before the index was loaded"));
      pending.clear();
      await subscription.unsubscribe();
      actor.stop();
    },
  };
}
