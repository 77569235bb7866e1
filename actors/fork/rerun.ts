/**
 * The Director's answer to `<root>.tasks.<id>.rerun` (protocol/rerun.ts): reads the original task and its node
 * records, decides which nodes the fork replays (machines/fork/plan.ts), and accepts the fork as a new task whose
 * record carries `forkOf` and the replay plan. Refused, with a message naming the problem: an unknown task, one not
 * ended yet, one whose records expired, an unknown node, an invalid template.
 */
import {
  encodeJson,
  errorReply,
  FINAL_STATES,
  parseTaskId,
  Requests,
  type ErrorReply,
  type ForkOf,
  type NodeRecord,
  type RerunReply,
  type RerunRequest,
} from "../../protocol/index.js";
import { changedInputs, mentionsAny, planFork, type ForkNode } from "../../machines/fork/plan.js";
import type { TemplateDocument } from "../../machines/language/ast.js";
import type { ParseCache } from "../../machines/language/parse-cache.js";
import type { BusMessage, BusSubscription, TaskStore, WorkQueue } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { acceptSubmission, decodeSubmission, type Submission } from "../director/intake.js";
import type { SubmissionGates } from "../director/gates.js";
import type { PublishEvent } from "../director/event-publisher.js";
import { missingRecords, readNodeRecords } from "../director/node-reads.js";
import { readTaskRecord } from "../director/records.js";
import { nodeAt } from "../evaluator/nodes.js";
import { serve } from "../serve.js";
import type { SizeLimits } from "../size-limits.js";

/** What the rerun responder works with. */
export interface RerunConfig {
  /** The task records. */
  tasks: TaskStore;
  /** The intake queue the fork is queued on. */
  queue: WorkQueue;
  /** The turns bucket holding the node records, and how long it keeps them. */
  records: TaskStore;
  maxAgeMs: number;
  parseCache: ParseCache;
  sizeLimits?: SizeLimits | undefined;
  publishEvent: PublishEvent;
  concurrency: number;
  /** The Director's submission gates: its delivery of the fork waits until `task.queued` is out (actors/director/gates.ts). */
  gates: SubmissionGates;
}

/** Serves `rerun` for a Director (queue group `director`). */
export function serveRerun(deps: ActorDeps, config: RerunConfig): BusSubscription {
  const rerun = async (request: RerunRequest, msg: BusMessage): Promise<RerunReply | ErrorReply> => {
    const taskId = parseTaskId(deps.subjects.taskIdOf(msg.subject));
    if (taskId === undefined) return errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`);
    const original = (await readTaskRecord(config.tasks, taskId))?.record;
    if (original === undefined) {
      // A task stored only as its queue item has not ended.
      if ((await config.queue.peek(taskId)) !== undefined)
        return errorReply(
          "CONFLICT",
          `task '${taskId}' is queued or running: a task can be re-run once it has completed, failed or been cancelled`,
        );
      return errorReply("NOT_FOUND", `no task '${taskId}'`);
    }
    if (!FINAL_STATES.has(original.state))
      return errorReply(
        "CONFLICT",
        `task '${taskId}' is ${original.state}: a task can be re-run once it has completed, failed or been cancelled`,
      );
    const records = await readNodeRecords(config.records, taskId);
    if (records.length === 0)
      return (
        (await missingRecords(deps, config.tasks, config.maxAgeMs, taskId)) ??
        errorReply("NOT_FOUND", `task '${taskId}' has no node records to replay (it ran no node, or ran before records were kept)`)
      );
    const inputs = { ...original.inputs, ...(request.inputs ?? {}) };
    const xml = request.xml ?? original.xml;
    const decoded = decodeSubmission(encodeJson({ xml, inputs }), config.sizeLimits, config.parseCache.parse);
    if (!decoded.ok) return decoded.reply;
    const before = config.parseCache.parse(original.xml);
    const after = config.parseCache.parse(xml);
    if (!before.ok || !after.ok) return errorReply("INVALID_TEMPLATE", `the template of task '${taskId}' cannot be read`);
    const changed = changedness(before.document, after.document, changedInputs(original.inputs, inputs));
    const plan = planFork(
      records.map((r) => forkNode(r, changed)),
      request.from,
      taskId,
    );
    if (!plan.ok) return errorReply(plan.code, plan.message);
    const forkOf: ForkOf = { taskId, from: plan.from.path };
    const submission: Submission = {
      ...decoded.submission,
      ...(request.taskId ? { taskId: request.taskId } : {}),
      ...(original.budget ? { budget: original.budget } : {}),
      ...(original.stream === undefined ? {} : { stream: original.stream }),
      forkOf,
      replay: { taskId, nodes: plan.nodes },
    };
    let announced: ((discarded: number | undefined) => void) | undefined;
    let accepted: Awaited<ReturnType<typeof acceptSubmission>> | undefined;
    try {
      accepted = await acceptSubmission(
        deps,
        config.tasks,
        config.queue,
        submission,
        (id) => void (announced = config.gates.submitting(id)),
      );
      const { replayed } = plan;
      const fork = accepted.reply.taskId;
      if (accepted.reply.status === "accepted")
        config.publishEvent(fork, 1, "task.queued", "queued", `queued: fork of ${taskId} from ${forkOf.from}`, { replayed }, forkOf);
      deps.log.info({ taskId: fork, forkOf, replayed }, "fork accepted");
      return { taskId: fork, status: accepted.reply.status, forkOf, replayed };
    } finally {
      announced?.(accepted?.discarded);
    }
  };
  return serve(deps, Requests.taskRerun, { queue: deps.subjects.queue("director"), concurrency: config.concurrency, handle: rerun });
}

/**
 * Whether the part of the template that holds a node path differs between `before` and `after`, or mentions one of
 * `inputs`. A path scoped into a subtask, map branch or library template (`0.steps.1/subtask1:0`) is judged by its
 * unscoped start; a function template's body of the task's own template (`templates.0.body`) by itself.
 */
function changedness(before: TemplateDocument, after: TemplateDocument, inputs: readonly string[]): (path: string) => boolean {
  const known = new Map<string, boolean>();
  const differs = (own: string): boolean => {
    let answer = known.get(own);
    if (answer === undefined) {
      const was = json(nodeAt(before, own));
      const now = json(nodeAt(after, own));
      answer = now === undefined || was !== now || mentionsAny(now, inputs);
      known.set(own, answer);
    }
    return answer;
  };
  return (path) => differs(path.split("/")[0] ?? path);
}

const json = (value: unknown): string | undefined => (value === undefined ? undefined : JSON.stringify(value));

function forkNode(record: NodeRecord, changed: (path: string) => boolean): ForkNode {
  const { output } = record;
  const isCut = (v: unknown) => typeof v === "object" && v !== null && (v as { truncated?: unknown }).truncated === true && "preview" in v;
  return {
    path: record.path,
    occurrence: record.occurrence,
    state: record.state,
    startedAt: record.startedAt,
    endedAt: record.endedAt,
    changed: changed(record.path),
    cut: output.contentTruncated === true || isCut(output.parsedContent) || Object.values(output.notes).some(isCut),
  };
}
