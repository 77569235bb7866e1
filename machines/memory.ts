/**
 * The Memory actor: answers associative-match requests from the global file-metadata index.
 *
 * One long-lived actor per Memory process. Inbound: `memory.match` (with the shell's request id). Effect:
 * `answer` (the shell sends the reply). Matching over a real index arrives with the Memory issue; the index in
 * context may be empty, and then every match is empty.
 */
import { setup } from "xstate";
import type { FileMatch, MatchReply, MatchRequest } from "../protocol/index.js";

/** A file of the index: absolute path and free-text metadata (no contents). */
export interface IndexEntry {
  path: string;
  metadata: string;
}

/** Context of the Memory actor. */
export interface MemoryContext {
  index: IndexEntry[];
}

/** A match request tagged with the shell's id for the reply. */
export type MemoryEvent = MatchRequest & { requestId: string };

/** Scores index entries by the share of query words found in their metadata. Pure. */
export function matchIndex(index: readonly IndexEntry[], request: MatchRequest, limit = 20): FileMatch[] {
  const words = new Set(
    [request.templateDescription, request.taskText ?? ""].join(" ").toLowerCase().split(/[^a-z0-9_]+/).filter((w) => w.length > 2),
  );
  if (words.size === 0) return [];
  return index
    .map((entry) => {
      const meta = entry.metadata.toLowerCase();
      const hits = [...words].filter((w) => meta.includes(w));
      return { path: entry.path, relevance: hits.join(", "), score: hits.length / words.size };
    })
    .filter((m) => m.score > 0)
    .sort((a, b) => b.score - a.score)
    .slice(0, limit);
}

/** The Memory machine. */
export const memoryMachine = setup({
  types: {
    context: {} as MemoryContext,
    events: {} as MemoryEvent,
    input: {} as { index?: IndexEntry[] },
  },
  actions: {
    answer: (_, _params: { requestId: string; reply: MatchReply }) => undefined,
  },
}).createMachine({
  id: "memory",
  context: ({ input }) => ({ index: input.index ?? [] }),
  initial: "serving",
  states: {
    serving: {
      description: "Answering match requests from the index.",
      on: {
        "memory.match": {
          actions: {
            type: "answer",
            params: ({ context, event }) => {
              const matches = matchIndex(context.index, event);
              return {
                requestId: event.requestId,
                reply: {
                  type: "memory.matched",
                  context: matches.length === 0 ? "no relevant files found" : `${matches.length} relevant files`,
                  matches,
                },
              };
            },
          },
        },
      },
    },
  },
});
