/** JSON Schemas of every public message, generated from the zod schemas in `protocol/`. */
import { z } from "zod";
import {
  CancelReply,
  CompileReply,
  CompileRequest,
  ErrorReply,
  SubmitReply,
  SubmitRequest,
  TaskEvent,
  TaskOutcome,
  TaskStatusReply,
  UserInput,
  UserInputReply,
  Goal,
  GoalEvent,
  GoalListReply,
  GoalReply,
  GoalSubmitRequest,
  OperatorAlert,
  PingReply,
  PingRequest,
  NodeListReply,
  NodeGetRequest,
  NodeDetailReply,
  RerunRequest,
  RerunReply,
  NodeRecord,
  NodeFinishedEventData,
  ModelTurnEventData,
  ToolCallEventData,
} from "../protocol/index.js";

/** Public messages by file name. */
export const PUBLIC_SCHEMAS = {
  "submit-request": SubmitRequest,
  "submit-reply": SubmitReply,
  "task-event": TaskEvent,
  "task-result": TaskOutcome,
  "task-status-reply": TaskStatusReply,
  "cancel-reply": CancelReply,
  "error-reply": ErrorReply,
  "compile-request": CompileRequest,
  "compile-reply": CompileReply,
  "user-input": UserInput,
  "user-input-reply": UserInputReply,
  "goal-submit-request": GoalSubmitRequest,
  "goal-reply": GoalReply,
  goal: Goal,
  "goal-list-reply": GoalListReply,
  "goal-event": GoalEvent,
  "operator-alert": OperatorAlert,
  "ping-request": PingRequest,
  "ping-reply": PingReply,
  "node-list-reply": NodeListReply,
  "node-get-request": NodeGetRequest,
  "node-detail-reply": NodeDetailReply,
  "rerun-request": RerunRequest,
  "rerun-reply": RerunReply,
  "node-record": NodeRecord,
  "node-finished-event-data": NodeFinishedEventData,
  "model-turn-event-data": ModelTurnEventData,
  "tool-call-event-data": ToolCallEventData,
} as const;

/** Every public schema as a JSON Schema document (draft 2020-12), keyed by file name. */
export function jsonSchemas(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(PUBLIC_SCHEMAS)) {
    out[name] = { $id: `dirigent/${name}.json`, title: name, ...z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) };
  }
  return out;
}
