/**
 * The Evaluator's side of a fork (protocol/fork.ts): a node the plan replays is answered from the original task's node
 * record instead of being evaluated. Its record, and those of the nodes evaluated within it in the original, are
 * written again for the fork (`replayedFrom` set) and announced as `node.finished` with `replayed: true`.
 */
import {
  cutText,
  decode,
  encode,
  EVENT_TEXT_MAX,
  NodeRecord,
  taskFailure,
  type NodeFinishedEventData,
  type NodeRef,
  type ReplayPlan,
  type TaskId,
} from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import { messageOf, type Logger } from "../deps.js";
import { nodeKey, type Replays } from "../evaluator/node-records.js";

/** Largest node record read back. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/** What a replay works with. */
export interface ReplayEnv {
  /** The fork. */
  taskId: TaskId;
  /** The turns bucket (both tasks' node records). */
  store: TaskStore | undefined;
  log: Logger;
  now(): Date;
  progress(event: string, message: string, data: Record<string, unknown>): void;
}

/** The {@link Replays} of one fork's walk. */
export function replays(plan: ReplayPlan, env: ReplayEnv): Replays {
  const byKey = new Map(plan.nodes.map((n) => [`${n.occurrence}#${n.path}`, n]));
  const read = async (ref: NodeRef): Promise<NodeRecord | undefined> => {
    const bytes = await env.store?.get(nodeKey(plan.taskId, ref.path, ref.occurrence));
    const decoded = bytes && decode(NodeRecord, bytes, MAX_RECORD_BYTES);
    return decoded && decoded.ok ? decoded.value : undefined;
  };
  /**
   * Writes the fork's copy of `record`, replayed `at`, and announces it. A replayed node and the nodes within it are
   * all replayed at the same instant, so that a fork of this fork finds them within it again (machines/fork/plan.ts).
   */
  const copy = async (record: NodeRecord, at: string): Promise<void> => {
    const mine: NodeRecord = {
      ...record,
      taskId: env.taskId,
      startedAt: at,
      endedAt: at,
      durationMs: 0,
      replayedFrom: plan.taskId,
    };
    try {
      await env.store?.put(nodeKey(env.taskId, record.path, record.occurrence), encode(NodeRecord, mine));
    } catch (err) {
      env.log.warn({ taskId: env.taskId, path: record.path, err: messageOf(err) }, "replayed node record not written");
    }
    const data: NodeFinishedEventData = {
      nodePath: record.path,
      occurrence: record.occurrence,
      name: record.name,
      kind: record.kind,
      status: record.output.status,
      durationMs: 0,
      ...(record.usage ? { usage: record.usage } : {}),
      ...(record.cost === undefined ? {} : { cost: record.cost }),
      preview: cutText(errorText(record) ?? record.output.content, EVENT_TEXT_MAX),
      replayed: true,
    };
    env.progress("node.finished", `${record.name}: ${record.output.status} (replayed from ${plan.taskId})`, data);
  };
  return {
    find: (path, occurrence) => byKey.get(`${occurrence}#${path}`),
    async replay(node) {
      let record: NodeRecord | undefined;
      const at = env.now().toISOString();
      try {
        record = await read(node);
        for (const nested of node.nested ?? []) {
          const inner = await read(nested);
          if (inner) await copy(inner, at);
        }
      } catch (err) {
        return taskFailure(
          "unexpected_error",
          `the record of node '${node.path}' of task '${plan.taskId}' could not be read: ${messageOf(err)}`,
        );
      }
      if (record === undefined)
        return taskFailure(
          "unexpected_error",
          `the record of node '${node.path}' of task '${plan.taskId}' is gone (expired?): it cannot be replayed`,
        );
      await copy(record, at);
      const { output } = record;
      return {
        content: output.content,
        status: output.status,
        notes: output.notes,
        ...(output.parsedContent === undefined ? {} : { parsedContent: output.parsedContent }),
        ...(record.error ? { error: record.error } : {}),
      };
    },
  };
}

const errorText = (record: NodeRecord): string | undefined =>
  record.error && "message" in record.error && typeof record.error.message === "string" ? record.error.message : undefined;
