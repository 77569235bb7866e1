/**
 * Intake of submissions on `<root>.tasks.submit`: decode (JSON or raw XML), validate the template, store the queued
 * task record durably as the intake queue's item (or, too large for one, in the task store, then queued by reference),
 * then answer. Nothing is acknowledged before it is stored, and nothing stored is left unqueued
 * (actors/director/unqueued.ts).
 */
import {
  decodeJson,
  encode,
  encodeJson,
  errorReply,
  parseTaskId,
  Requests,
  SubmitRequest,
  TASK_ID_HEADER,
  TaskRecord,
  textOf,
  validate,
  type ErrorReply,
  type SubmitReply,
  type TaskId,
} from "../../protocol/index.js";
import { MAX_STORED_VALUE_BYTES, type BusMessage, type TaskStore, type WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { respond } from "../serve.js";
import { inSpan, SpanKind, storedTraceContext } from "../tracing.js";
import { checkInputs, checkSubmission, checkTemplate, DEFAULT_SIZE_LIMITS, tooLargeReply, type SizeLimits } from "../size-limits.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { listUnqueued, unlist } from "./unqueued.js";
import { unfillablePlaceholder } from "./placeholders.js";
import type { ParseOutcome } from "../../machines/language/ast.js";
import type { BusSubscription } from "../bus.js";
import type { SubmissionGates } from "./gates.js";
import type { PublishEvent } from "./event-publisher.js";

/**
 * A decoded, validated submission: the id its submitter chose, if any ({@link SubmitRequest}), and what its task
 * record takes from it ({@link TaskRecord}: `xml` is empty for a request in words until the Director has it compiled;
 * a fork's `forkOf` and `replay`, actors/fork/rerun.ts).
 */
export type Submission = Pick<SubmitRequest, "taskId"> &
  Pick<TaskRecord, "xml" | "prompt" | "inputs" | "budget" | "stream" | "trace" | "forkOf" | "replay">;

/**
 * Decodes a submit body: JSON `{taskId?, xml|template, inputs?}` or a raw XML document. Checks the sizes against
 * `limits` (`PAYLOAD_TOO_LARGE` naming limit, size and setting) and validates the template.
 */
export function decodeSubmission(
  data: Uint8Array,
  limits: SizeLimits = DEFAULT_SIZE_LIMITS,
  parse: (xml: string) => ParseOutcome = parseTemplate,
): { ok: true; submission: Submission } | { ok: false; reply: ErrorReply } {
  const body = checkSubmission(data.byteLength, limits);
  if (body) return { ok: false, reply: tooLargeReply(body) };
  let submission: Submission;
  const first = firstNonSpace(data);
  if (first === "<") {
    submission = { xml: textOf(data), inputs: {} };
  } else {
    const json = decodeJson(data, limits.submissionBytes);
    if (!json.ok)
      return { ok: false, reply: errorReply("INVALID_MESSAGE", `${json.error.message} (send JSON {"xml": "..."} or a raw XML document)`) };
    const parsed = validate(SubmitRequest, json.value);
    if (!parsed.ok) {
      const idIssue = parsed.error.issues.find((i) => i.path === "/taskId");
      const code = idIssue ? "INVALID_ID" : "INVALID_MESSAGE";
      return { ok: false, reply: errorReply(code, parsed.error.message, { details: parsed.error.issues }) };
    }
    const { taskId, xml, template, prompt, inputs, budget, stream } = parsed.value;
    submission = {
      xml: xml ?? template ?? "",
      inputs: inputs ?? {},
      ...(taskId ? { taskId } : {}),
      ...(prompt === undefined ? {} : { prompt }),
    };
    if (budget) submission.budget = budget;
    if (stream !== undefined) submission.stream = stream;
    const input = checkInputs(submission.inputs, limits);
    if (input) return { ok: false, reply: tooLargeReply(input) };
    // A prompt is stored as is; the Director has it compiled and validated before the task runs.
    if (prompt !== undefined) return { ok: true, submission };
  }
  const template = checkTemplate(submission.xml, limits);
  if (template) return { ok: false, reply: tooLargeReply(template) };
  const parsed = parse(submission.xml);
  if (!parsed.ok) {
    const { message, line, col } = parsed.error;
    return { ok: false, reply: errorReply("INVALID_TEMPLATE", message, { ...(line ? { line } : {}), ...(col ? { col } : {}) }) };
  }
  if (!parsed.document.entry) {
    return {
      ok: false,
      reply: errorReply("INVALID_TEMPLATE", "the template defines no task to run (no top-level <task>, <call> or <cond>)"),
    };
  }
  return { ok: true, submission };
}

/**
 * Stores a submission: its queued record is the intake queue's item, stored (and de-duplicated by task id within the
 * queue's window) before the reply. A task id given by the submitter is also looked up among the stored records,
 * at the same time, so a task submitted again after the window is still answered `duplicate` (its second queue item
 * is removed again: `discarded`).
 */
export async function acceptSubmission(
  deps: ActorDeps,
  store: TaskStore,
  queue: WorkQueue,
  submission: Submission,
  queuing?: (taskId: TaskId) => void,
): Promise<Accepted> {
  // A generated id is a task id: the runtime's newId makes UUIDs, 36 characters of hex digits and '-'.
  const taskId = submission.taskId ?? (deps.newId() as TaskId);
  const at = deps.now().toISOString();
  const record: TaskRecord = {
    taskId,
    state: "queued",
    xml: submission.xml,
    ...(submission.prompt === undefined ? {} : { prompt: submission.prompt }),
    inputs: submission.inputs,
    ...(submission.budget ? { budget: submission.budget } : {}),
    ...(submission.stream === undefined ? {} : { stream: submission.stream }),
    ...(submission.trace ? { trace: submission.trace } : {}),
    ...(submission.forkOf ? { forkOf: submission.forkOf } : {}),
    ...(submission.replay ? { replay: submission.replay } : {}),
    submittedAt: at,
    updatedAt: at,
  };
  const item = encode(TaskRecord, record);
  if (queue.maxItemBytes !== undefined && item.byteLength > queue.maxItemBytes)
    return acceptLarge(deps, store, queue, taskId, item, queuing);
  // An unreadable store does not stop the submission: the queue has it, and a duplicate is dropped when delivered.
  const stored = submission.taskId === undefined ? undefined : store.get(taskId).catch(() => undefined);
  queuing?.(taskId);
  const { duplicate, seq } = await queue.enqueue(taskId, item);
  if (duplicate) return { reply: { taskId, status: "duplicate" } };
  if ((await stored) !== undefined) {
    // Queued again after the window: the item just queued is removed. A Director of this process that has it
    // delivered meanwhile waits for this answer and drops it (see `queuing`); one elsewhere runs it, finds the record
    // stored and publishes nothing.
    await queue.discard(taskId, seq).catch(() => undefined);
    return { reply: { taskId, status: "duplicate" }, discarded: seq };
  }
  return { reply: { taskId, status: "accepted" } };
}

/**
 * A queued record too large for one queue item (a large template): stored in the task store first (which keeps large
 * values in chunks), and queued as `{taskId}`, the item a Director claims by reading the record. Listed as unqueued
 * from before it is stored until it is queued (actors/director/unqueued.ts): once stored it is accepted, and should the
 * queue publish fail, or this process die before it, a Director queues it from the list.
 */
async function acceptLarge(
  deps: ActorDeps,
  store: TaskStore,
  queue: WorkQueue,
  taskId: TaskId,
  record: Uint8Array,
  queuing?: (taskId: TaskId) => void,
): Promise<Accepted> {
  await listUnqueued(store, taskId, deps.now());
  // A duplicate stays listed: the Director that looks at the list next finds its record and takes it off.
  if ((await store.create(taskId, record)) === "exists") return { reply: { taskId, status: "duplicate" } };
  queuing?.(taskId);
  let duplicate: boolean;
  try {
    ({ duplicate } = await queue.enqueue(taskId, encodeJson({ taskId })));
  } catch (err) {
    deps.log.warn({ taskId, err: messageOf(err) }, "a stored task could not be queued; a Director queues it from the unqueued list");
    return { reply: { taskId, status: "accepted" } };
  }
  await unlist(store, [taskId]).catch((err: unknown) =>
    deps.log.debug({ taskId, err: messageOf(err) }, "a queued task stays on the unqueued list until a Director looks at it"),
  );
  return { reply: { taskId, status: duplicate ? "duplicate" : "accepted" } };
}

/** What {@link acceptSubmission} did: the reply, and the queue item it removed again (a duplicate after the window). */
export interface Accepted {
  reply: SubmitReply;
  discarded?: number;
}

/** The queued record an intake item carries; `undefined` for an item of an older release (`{taskId}` only). */
export function queuedRecord(data: Uint8Array): { ok: true; record: TaskRecord | undefined } | { ok: false; message: string } {
  const json = decodeJson(data, MAX_STORED_VALUE_BYTES);
  if (!json.ok) return { ok: false, message: json.error.message };
  const value = json.value;
  if (typeof value === "object" && value !== null && Object.keys(value).length === 1 && "taskId" in value)
    return { ok: true, record: undefined };
  const decoded = validate(TaskRecord, value);
  return decoded.ok ? { ok: true, record: decoded.value } : { ok: false, message: decoded.error.message };
}

/** How {@link handleSubmit} checks a submission beyond its decoding. */
export interface SubmitOptions {
  /**
   * Refuse (`INVALID_TEMPLATE`) an atomic task whose prose has a `{{name}}` that nothing can ever fill (strict
   * substitution: under lenient substitution it becomes a marker, which is allowed).
   */
  strictPlaceholders?: boolean;
}

/**
 * Handles one message on the submit subject, in a `task.submit` span under the submitter's `traceparent` header when
 * it sent one; the task keeps that trace (docs/traces.md).
 */
export function handleSubmit(
  deps: ActorDeps,
  store: TaskStore,
  queue: WorkQueue,
  msg: BusMessage,
  queuing?: (taskId: TaskId) => void,
  limits: SizeLimits = DEFAULT_SIZE_LIMITS,
  parse: (xml: string) => ParseOutcome = parseTemplate,
  options: SubmitOptions = {},
): Promise<Accepted | undefined> {
  return inSpan("task.submit", { parent: msg.headers ?? undefined, kind: SpanKind.SERVER }, async (span) => {
    const accepted = await submit(deps, store, queue, msg, queuing, limits, parse, options);
    if (accepted) span.span.setAttributes({ "dirigent.task_id": accepted.reply.taskId, "dirigent.submit.status": accepted.reply.status });
    return accepted;
  });
}

async function submit(
  deps: ActorDeps,
  store: TaskStore,
  queue: WorkQueue,
  msg: BusMessage,
  queuing: ((taskId: TaskId) => void) | undefined,
  limits: SizeLimits,
  parse: (xml: string) => ParseOutcome,
  options: SubmitOptions,
): Promise<Accepted | undefined> {
  let decoded: ReturnType<typeof decodeSubmission>;
  try {
    decoded = decodeSubmission(msg.data, limits, parse);
    const parsed =
      decoded.ok && options.strictPlaceholders && decoded.submission.prompt === undefined ? parse(decoded.submission.xml) : undefined;
    const unfillable = parsed?.ok && decoded.ok ? unfillablePlaceholder(parsed.document, decoded.submission.inputs) : undefined;
    if (unfillable)
      decoded = { ok: false, reply: errorReply("INVALID_TEMPLATE", unfillable.message, { line: unfillable.line, col: unfillable.col }) };
  } catch (err) {
    // Decoding returns its refusals; should a check throw all the same, the submitter still gets an answer.
    decoded = { ok: false, reply: errorReply("INVALID_MESSAGE", `submission could not be decoded: ${messageOf(err)}`) };
  }
  if (!decoded.ok) {
    deps.log.warn({ subject: msg.subject, error: decoded.reply.error }, "rejected submission");
    respond(msg, Requests.submit, decoded.reply);
    return undefined;
  }
  const trace = storedTraceContext(msg.headers);
  const chosen = headerTaskId(msg.headers);
  if (chosen !== undefined && decoded.submission.taskId === undefined) {
    const taskId = parseTaskId(chosen);
    if (taskId === undefined) {
      respond(msg, Requests.submit, errorReply("INVALID_ID", `${TASK_ID_HEADER} '${chosen}': must be 1–64 characters of [A-Za-z0-9_-]`));
      return undefined;
    }
    decoded.submission.taskId = taskId;
  }
  try {
    const submission = trace ? { ...decoded.submission, trace } : decoded.submission;
    const accepted = await acceptSubmission(deps, store, queue, submission, queuing);
    respond(msg, Requests.submit, accepted.reply);
    return accepted;
  } catch (err) {
    deps.log.error({ err: messageOf(err) }, "could not store submission");
    respond(msg, Requests.submit, errorReply("UNAVAILABLE", `could not store the task: ${messageOf(err)}`));
    return undefined;
  }
}

function firstNonSpace(data: Uint8Array): string | undefined {
  for (const byte of data) {
    if (byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09 && byte !== 0xef && byte !== 0xbb && byte !== 0xbf)
      return String.fromCharCode(byte);
  }
  return undefined;
}

/** The task id a submission's {@link TASK_ID_HEADER} header chooses (header names are not case-sensitive). */
function headerTaskId(headers: ReadonlyMap<string, string> | undefined): string | undefined {
  for (const [name, value] of headers ?? []) if (name.toLowerCase() === TASK_ID_HEADER.toLowerCase()) return value.trim();
  return undefined;
}

/** What {@link serveSubmit} checks submissions with, and how it tells of them. */
export interface ServeSubmitOptions {
  /** Deliveries of this process wait for their submission's answer (actors/director/gates.ts). */
  gates: SubmissionGates;
  sizeLimits?: SizeLimits;
  parse: (xml: string) => ParseOutcome;
  strictPlaceholders: boolean;
  /** Publishes each accepted task's `task.queued`. */
  publishEvent: PublishEvent;
}

/** Serves `<root>.tasks.submit` in the Directors' queue group ({@link handleSubmit}). */
export function serveSubmit(deps: ActorDeps, store: TaskStore, queue: WorkQueue, options: ServeSubmitOptions): BusSubscription {
  const { gates, publishEvent } = options;
  return deps.bus.subscribe(
    Requests.submit.servedOn(deps.subjects),
    async (msg) => {
      let announced: ((discarded: number | undefined) => void) | undefined;
      const queuing = (taskId: TaskId) => void (announced = gates.submitting(taskId));
      let accepted: Accepted | undefined;
      try {
        accepted = await handleSubmit(deps, store, queue, msg, queuing, options.sizeLimits, options.parse, {
          strictPlaceholders: options.strictPlaceholders,
        });
        if (accepted?.reply.status === "accepted") publishEvent(accepted.reply.taskId, 1, "task.queued", "queued", "queued");
      } finally {
        announced?.(accepted?.discarded);
      }
    },
    { queue: deps.subjects.queue("director") },
  );
}
