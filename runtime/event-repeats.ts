/**
 * A task's live events without their repeats. A plain subscriber on `<root>.tasks.<id>.events` gets every attempt of
 * a write sent again (docs/deploy.md, "What a subscriber can see twice"): around a lost connection or a leader loss
 * the same event comes again, byte for byte. Two different events can also share a number around a takeover (the
 * successor's `task.resumed` and an event of the previous owner stored after it read); both are stored, so both are
 * kept here. An event is a repeat when one with the same `seq`, `type` and `at` came before.
 */
import type { TaskEvent } from "../protocol/index.js";

/** How many of a task's latest events are remembered to tell a repeat: a write sent again is one of the latest. */
export const REMEMBERED_EVENTS = 4096;

/**
 * A filter for one task's live events: true the first time an event comes, false when it comes again. It remembers
 * the last `remembered` distinct events, so memory stays bounded for a task of any length.
 *
 * @example const fresh = firstComing(); if (fresh(event)) onEvent(event);
 */
export function firstComing(remembered = REMEMBERED_EVENTS): (event: TaskEvent) => boolean {
  const seen = new Set<string>();
  return (event) => {
    const key = `${event.seq} ${event.type} ${event.at}`;
    if (seen.has(key)) return false;
    seen.add(key);
    // A Set iterates in insertion order: the first key is the oldest.
    if (seen.size > remembered) seen.delete(seen.values().next().value as string);
    return true;
  };
}
