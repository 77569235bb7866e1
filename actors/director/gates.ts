/**
 * What a Director waits for before it runs a delivered queue item: the answer to the item's submission, when this
 * process is still giving it. The queue can deliver an item before its submitter has the queue's acknowledgement; the
 * task's `task.queued` event goes out first, and an item the submission removed again (a duplicate) does not run.
 */
import type { TaskItem } from "../bus.js";
import type { TaskId } from "../../protocol/index.js";

/** The submission gates of one Director. */
export interface SubmissionGates {
  /**
   * Opens the gate of a submission this process is answering (its task id known, its item about to be queued); returns
   * the function that closes it once answered, with the sequence of the item removed again, if any.
   */
  submitting(taskId: TaskId): (discarded: number | undefined) => void;
  /** Waits for the answer to the item's submission when this process is giving it; true when it removed the item. */
  dropped(item: TaskItem): Promise<boolean>;
}

/** Makes the {@link SubmissionGates} of one Director. */
export function submissionGates(): SubmissionGates {
  /** Submissions of this process not answered yet, resolving to the sequence of the item they removed again, if any. */
  const answering = new Map<TaskId, Promise<number | undefined>>();
  return {
    submitting(taskId) {
      let close: (discarded: number | undefined) => void = () => undefined;
      answering.set(taskId, new Promise((resolve) => (close = resolve)));
      return (discarded) => {
        answering.delete(taskId);
        close(discarded);
      };
    },
    async dropped(item) {
      const gate = answering.get(item.id);
      return gate !== undefined && (await gate) === item.seq;
    },
  };
}
