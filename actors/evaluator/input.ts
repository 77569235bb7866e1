/**
 * `request_user_input`: while a session waits, the Evaluator running its task listens on `<root>.tasks.<id>.input`.
 * The first valid {@link UserInput} is the answer (a sender that asked for a reply gets `accepted`); malformed
 * messages get a coded error reply and the wait goes on. No answer within the timeout ends the wait with an error.
 *
 * Each wait's outcome (the answer, or the timeout) is recorded in the turns bucket, keyed by task, question and the
 * question's occurrence in the task ({@link taskInputs}): the walk is deterministic given its answers, so a re-run
 * of the task (a Director takeover) asks the same questions in the same order, and gets the recorded outcomes at
 * once instead of asking the user again.
 */
import { recordDigest } from "../record-digest.js";
import { decode, encode, encodeJson, errorReply, InputRecord, Requests, type InputRequest, type TaskId } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { respond } from "../serve.js";

/** Longest wait for an answer when neither the request nor the configuration says otherwise: 10 minutes. */
export const DEFAULT_INPUT_TIMEOUT_MS = 600_000;

/** Waits for the answer to `request` of task `taskId`; rejects on timeout or when `signal` aborts. */
export function waitForInput(
  deps: ActorDeps,
  taskId: TaskId,
  request: InputRequest,
  maxTimeoutMs: number,
  signal: AbortSignal,
): Promise<string> {
  const timeoutMs = Math.min(request.timeout_s === undefined ? maxTimeoutMs : request.timeout_s * 1000, maxTimeoutMs);
  const subject = Requests.taskInput.subjectOf(deps.subjects, taskId);
  return new Promise<string>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", aborted);
      void subscription.unsubscribe();
      outcome();
    };
    const subscription = deps.bus.subscribe(subject, (msg) => {
      if (settled) return;
      const decoded = decode(Requests.taskInput.request, msg.data);
      if (!decoded.ok) {
        msg.respond(encodeJson(errorReply("INVALID_MESSAGE", decoded.error.message, { details: decoded.error.issues })));
        return;
      }
      respond(msg, Requests.taskInput, { taskId, status: "accepted" });
      finish(() => resolve(decoded.value.text));
    });
    const timer = setTimeout(
      () => finish(() => reject(new InputTimeout(`no answer on ${subject} within ${Math.round(timeoutMs / 1000)} s`))),
      timeoutMs,
    );
    const aborted = () => finish(() => reject(signal.reason instanceof Error ? signal.reason : new Error("cancelled")));
    if (signal.aborted) aborted();
    else signal.addEventListener("abort", aborted, { once: true });
  });
}

/** No answer came within the wait's timeout. */
export class InputTimeout extends Error {
  override readonly name = "InputTimeout";
}

/** What a walk offers besides waiting: whether the next wait for a question has a recorded outcome. */
export interface InputRecords {
  /** True when the next wait for `request` will return a recorded outcome (a re-run): the question is not put again. */
  inputRecorded(request: InputRequest): Promise<boolean>;
}

/** The recorded waits for input of one task's evaluation. */
export interface TaskInputs extends InputRecords {
  /** Waits for the answer to `request`: the recorded outcome on a re-run, else the user's, recorded once it came. */
  wait(request: InputRequest, signal: AbortSignal): Promise<string>;
}

/**
 * The waits for input of task `taskId`, recorded in `store` (the turns bucket; absent: nothing is recorded). The nth
 * time a question is asked in the task is keyed by the question and n, not by node path: a question asked under a
 * subtask's scoped path and looked up by the node's own path finds the same record.
 */
export function taskInputs(deps: ActorDeps, taskId: TaskId, maxTimeoutMs: number, store: TaskStore | undefined): TaskInputs {
  // Made at the first question: most tasks ask none, and an empty Map is 0.2 KB held for each task in flight.
  let asked: Map<string, number> | undefined;
  const keyOf = (request: InputRequest, n: number) => `${taskId}.i${recordDigest([request.question, n])}`;
  const next = (request: InputRequest) => (asked?.get(request.question) ?? 0) + 1;
  const read = async (key: string): Promise<InputRecord | undefined> => {
    if (!store) return undefined;
    try {
      const bytes = await store.get(key);
      const decoded = bytes ? decode(InputRecord, bytes) : undefined;
      if (decoded && !decoded.ok)
        deps.log.warn({ key, problem: decoded.error.message }, "input record ignored: the question is asked again");
      return decoded?.ok ? decoded.value : undefined;
    } catch (err) {
      deps.log.warn({ key, err: messageOf(err) }, "input record unreadable: the question is asked again");
      return undefined;
    }
  };
  const write = async (key: string, record: InputRecord) => {
    try {
      await store?.create(key, encode(InputRecord, record));
    } catch (err) {
      deps.log.warn({ key, err: messageOf(err) }, "input record not written: a re-run would ask again");
    }
  };
  return {
    inputRecorded: async (request) => (await read(keyOf(request, next(request)))) !== undefined,
    wait(request, signal) {
      const n = next(request);
      (asked ??= new Map()).set(request.question, n);
      const key = keyOf(request, n);
      // Listening starts at once, before the record is read: a question announced right after this call can be
      // answered at once. A recorded outcome ends the listening.
      const replayed = new AbortController();
      const live = waitForInput(deps, taskId, request, maxTimeoutMs, AbortSignal.any([signal, replayed.signal]));
      live.catch(() => undefined);
      return (async () => {
        const recorded = await read(key);
        if (recorded) {
          replayed.abort();
          if ("answer" in recorded) return recorded.answer;
          throw new InputTimeout(recorded.timedOut);
        }
        try {
          const answer = await live;
          await write(key, { v: 1, answer });
          return answer;
        } catch (err) {
          if (err instanceof InputTimeout) await write(key, { v: 1, timedOut: err.message });
          throw err;
        }
      })();
    },
  };
}
