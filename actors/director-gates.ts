/**
 * What a Director checks before it runs a delivered queue item: whether its submission, answered by this process, has
 * gone out yet, and whether this process removed the item meanwhile.
 */
import type { WorkItem } from "./bus.js";

/** How many removed queue items a Director remembers. */
const REMEMBERED = 1000;

/** The gates of one Director. */
export interface DeliveryGates {
  /**
   * Opens the gate of a submission this process is answering (the task id is known, the item is about to be queued);
   * returns the function that closes it once answered, with the sequence of the item removed again, if any.
   */
  submitting(taskId: string): (discarded: number | undefined) => void;
  /** Notes that this process removed the queue item `seq` of `taskId` (a task cancelled while queued). */
  removed(taskId: string, seq: number): void;
  /**
   * Whether a delivered item is not to run: waits for the answer of its submission when this process is still giving
   * it (so the task's events go out in their order), then tells whether the item was removed.
   */
  dropped(item: WorkItem): Promise<boolean>;
}

/** Makes the {@link DeliveryGates} of one Director. */
export function deliveryGates(): DeliveryGates {
  /**
   * Submissions of this process not answered yet: a task delivered here before its `task.queued` event went out
   * (the queue can deliver it before its submitter has the queue's acknowledgement) waits for it.
   */
  const announcing = new Map<string, Promise<void>>();
  /**
   * Queue items this process removed lately (a duplicate submission's, a task cancelled while queued), by task id: one
   * already on its way here when it was removed is dropped when it arrives, not run.
   */
  const removedItems = new Map<string, number>();
  const removed = (taskId: string, seq: number) => {
    removedItems.delete(taskId);
    removedItems.set(taskId, seq);
    if (removedItems.size > REMEMBERED) removedItems.delete(removedItems.keys().next().value as string);
  };
  return {
    submitting(taskId) {
      let open: () => void = () => undefined;
      announcing.set(taskId, new Promise<void>((resolve) => (open = resolve)));
      return (discarded) => {
        if (discarded !== undefined) removed(taskId, discarded);
        announcing.delete(taskId);
        open();
      };
    },
    removed,
    async dropped(item) {
      await announcing.get(item.id);
      return removedItems.get(item.id) === item.seq;
    },
  };
}
