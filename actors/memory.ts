/**
 * The Memory role: serves `<root>.memory.match` (queue group `memory`) from one {@link memoryMachine} actor.
 */
import { createActor } from "xstate";
import { memoryMachine, type IndexEntry } from "../machines/memory.js";
import { MatchRequest, type MatchReply } from "../protocol/index.js";
import type { ActorDeps, RoleHandle } from "./deps.js";
import { serve } from "./serve.js";

/** Starts the Memory role. */
export function startMemory(deps: ActorDeps, options: { concurrency: number; index?: IndexEntry[] }): RoleHandle {
  const pending = new Map<string, (reply: MatchReply) => void>();
  const actor = createActor(
    memoryMachine.provide({
      actions: {
        answer: (_, { requestId, reply }) => {
          pending.get(requestId)?.(reply);
          pending.delete(requestId);
        },
      },
    }),
    { input: options.index ? { index: options.index } : {} },
  ).start();
  const subscription = serve(deps, {
    subject: deps.subjects.memoryMatch,
    queue: deps.subjects.queue("memory"),
    schema: MatchRequest,
    concurrency: options.concurrency,
    handle: (request) =>
      new Promise<MatchReply>((resolve) => {
        const requestId = deps.newId();
        pending.set(requestId, resolve);
        actor.send({ ...request, requestId });
      }),
  });
  return {
    role: "memory",
    async stop() {
      await subscription.unsubscribe();
      actor.stop();
    },
  };
}
