/**
 * The Memory actor: answers associative-match requests from the global file-metadata index.
 *
 * One long-lived actor per Memory process. It loads the current index generation (`loading`), answers
 * `memory.match` requests (`serving`), and loads a new generation when the store reports one (`reloading`,
 * still answering from the generation it has). Requests that arrive before the first load are held and answered
 * when it ends. Loading and ranking are injected: the `loadIndex` actor loads a generation (the shell keeps the
 * ranking structure, which is not plain data), and the `answer` action ranks and replies.
 */
import { assign, enqueueActions, fromPromise, setup } from "xstate";
import type { MatchRequest } from "../../protocol/index.js";
import { notProvided } from "../not-provided.js";

/** A file of the index: absolute path and free-text metadata (no contents); its schema is in protocol/memory.ts. */
export type { IndexEntry } from "../../protocol/index.js";

/** A match request tagged with the shell's id for the reply. */
export type MatchEvent = MatchRequest & { requestId: string };

/** Events of the Memory machine. */
export type MemoryEvent = MatchEvent | { type: "index.changed"; generation: string };

/** What `loadIndex` reports: the generation it loaded and its size. */
export interface LoadedIndex {
  generation: string;
  entries: number;
}

/** Context of the Memory actor: plain data only. */
export interface MemoryContext {
  /** Generation being served; `null` before the first load. */
  generation: string | null;
  /** Entries in the generation being served. */
  entries: number;
  /** Newest generation the store reported. */
  wanted: string | null;
  /** Requests held until the first load ends. */
  held: MatchEvent[];
}

/** The Memory machine. */
export const memoryMachine = setup({
  types: {
    context: {} as MemoryContext,
    events: {} as MemoryEvent,
    input: {} as Record<string, never>,
  },
  actions: {
    /** Ranks the request over the loaded generation and sends the reply. */
    answer: (_, _params: { request: MatchEvent; generation: string | null }) => undefined,
    /** Reports a failed load (the previous generation stays in service). */
    loadFailed: (_, _params: { error: unknown }) => undefined,
    /** Notes the newest generation the store reported. */
    noteWanted: assign({ wanted: ({ context, event }) => (event.type === "index.changed" ? event.generation : context.wanted) }),
    /** The loaded generation is the one served. */
    serveLoaded: assign((_, loaded: LoadedIndex) => ({ generation: loaded.generation, entries: loaded.entries })),
    /** A failed first load serves the empty generation. */
    serveEmpty: assign({ generation: "" }),
    /** Holds a match request until the first load ends. */
    holdRequest: assign({ held: ({ context, event }) => (event.type === "memory.match" ? [...context.held, event] : context.held) }),
    /** The held requests, raised again to be answered. */
    releaseHeld: enqueueActions(({ context, enqueue }) => {
      for (const request of context.held) enqueue.raise(request);
      enqueue.assign({ held: [] });
    }),
  },
  actors: {
    loadIndex: fromPromise<LoadedIndex, { generation: string | null }>(async () => notProvided("memory.loadIndex")),
  },
  guards: {
    isNewGeneration: ({ context, event }) => event.type === "index.changed" && event.generation !== context.generation,
    stillBehind: ({ context }) => context.wanted !== null && context.wanted !== context.generation,
  },
}).createMachine({
  id: "memory",
  context: { generation: null, entries: 0, wanted: null, held: [] },
  initial: "loading",
  on: {
    "index.changed": { actions: "noteWanted" },
  },
  states: {
    loading: {
      description: "Loading the first generation; match requests are held.",
      invoke: {
        src: "loadIndex",
        input: ({ context }) => ({ generation: context.wanted }),
        onDone: {
          target: "settling",
          actions: { type: "serveLoaded", params: ({ event }) => event.output },
        },
        onError: {
          target: "settling",
          actions: [{ type: "loadFailed", params: ({ event }) => ({ error: event.error }) }, "serveEmpty"],
        },
      },
      on: {
        "memory.match": { actions: "holdRequest" },
      },
    },
    settling: {
      description: "Answering held requests, then reloading if the store moved on meanwhile.",
      entry: "releaseHeld",
      always: [{ guard: "stillBehind", target: "reloading" }, { target: "serving" }],
    },
    serving: {
      description: "Answering match requests from the loaded generation.",
      on: {
        "memory.match": {
          actions: { type: "answer", params: ({ context, event }) => ({ request: event, generation: context.generation }) },
        },
        "index.changed": {
          guard: "isNewGeneration",
          target: "reloading",
          actions: "noteWanted",
        },
      },
    },
    reloading: {
      description: "Loading a new generation while still answering from the previous one.",
      invoke: {
        src: "loadIndex",
        input: ({ context }) => ({ generation: context.wanted }),
        onDone: {
          target: "settling",
          actions: { type: "serveLoaded", params: ({ event }) => event.output },
        },
        onError: { target: "serving", actions: { type: "loadFailed", params: ({ event }) => ({ error: event.error }) } },
      },
      on: {
        "memory.match": {
          actions: { type: "answer", params: ({ context, event }) => ({ request: event, generation: context.generation }) },
        },
      },
    },
  },
});
