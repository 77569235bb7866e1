/**
 * The inspector's window on node records (docs/protocol.md "Node records"): `/api/tasks/<id>/nodes` and
 * `/api/tasks/<id>/node?path=&occurrence=` ask a Director on `<root>.tasks.<id>.nodes` / `.node`, the same subjects
 * `dirigent show` asks, and answer the reply as JSON; `POST /api/tasks/<id>/rerun` forks the task from a node
 * (`<root>.tasks.<id>.rerun`, as `dirigent rerun`). A protocol error becomes an HTTP status with `{error, code}`.
 */
import { ask, RemoteError } from "../../actors/ask.js";
import type { Bus } from "../../actors/bus.js";
import { Requests, RerunRequest, validate, type RerunReply, type Subjects, type TaskId } from "../../protocol/index.js";
import type { NodeDetailReply, NodeListReply } from "../../protocol/node-records.js";
import { messageOf } from "../../protocol/errors.js";
import { clientDeps } from "../client.js";

/** An answer of the node API: an HTTP status and its JSON body. */
export interface NodeApiAnswer {
  status: number;
  body: NodeListReply | NodeDetailReply | RerunReply | { error: string; code?: string };
}

/** HTTP status of a protocol error code: unknown task 404, records aged out 410, no Director or no answer 502/504. */
const STATUS: Record<string, number> = {
  NOT_FOUND: 404,
  EXPIRED: 410,
  CONFLICT: 409,
  INVALID_MESSAGE: 400,
  INVALID_TEMPLATE: 400,
  INVALID_ID: 400,
  PAYLOAD_TOO_LARGE: 413,
  NO_RESPONDERS: 502,
  UNAVAILABLE: 502,
  TIMEOUT: 504,
};

/** Asks the runtime for node records, for {@link NodeApiAnswer}s of the inspector server. */
export function nodeApi(bus: Bus, subjects: Subjects, timeoutMs = 10_000) {
  const deps = clientDeps(bus, subjects);
  const answer = async (asking: () => Promise<NodeListReply | NodeDetailReply | RerunReply>): Promise<NodeApiAnswer> => {
    try {
      return { status: 200, body: await asking() };
    } catch (err) {
      if (err instanceof RemoteError) return { status: STATUS[err.code] ?? 502, body: { error: err.message, code: err.code } };
      return { status: 502, body: { error: messageOf(err) } };
    }
  };
  return {
    /** The task's nodes that have ended, in the order they started. */
    list: (taskId: TaskId) => answer(() => ask(deps, Requests.taskNodes.at(taskId), {}, { timeoutMs })),
    /** One node's record with its conversations; `occurrence` absent asks for the last one. */
    get: (taskId: TaskId, path: string, occurrence: number | undefined) =>
      answer(() => ask(deps, Requests.taskNode.at(taskId), { path, ...(occurrence === undefined ? {} : { occurrence }) }, { timeoutMs })),
    /** Forks the task (`body`: a {@link RerunRequest} as JSON, checked here before it is sent). */
    rerun: async (taskId: TaskId, body: unknown): Promise<NodeApiAnswer> => {
      const request = validate(RerunRequest, body);
      if (!request.ok) return { status: 400, body: { error: request.error.message, code: "INVALID_MESSAGE" } };
      return answer(() => ask(deps, Requests.taskRerun.at(taskId), request.value, { timeoutMs }));
    },
  };
}
