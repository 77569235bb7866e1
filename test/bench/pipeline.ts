/**
 * The dirigent side of the comparison: all four roles on a nats-server (JetStream intake, KV task and turn
 * records, the events stream), answered by an in-process model stub behind the `CallModel` interface, and a
 * submitter on its own NATS connection that submits on `<root>.tasks.submit` and waits for `<root>.tasks.<id>.result`.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "../../actors/deps.js";
import type { CallModel } from "../../actors/model.js";
import { createSubjects, decode, encodeJson, SubmitReply, TaskOutcome, type Subjects } from "../../protocol/index.js";
import { loadConfig } from "../../runtime/config.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { startSystem, type SystemHandle } from "../../runtime/system.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot } from "../support/nats-server.js";

/** The task every run submits: one atomic task, one model turn. */
export const TRIVIAL_TASK = '<task type="atomic"><description>Answer with the word ok.</description></task>';

/** A model stub that answers at once, or after `delayMs` (aborted with the call). */
export function stubModel(delayMs = 0): CallModel {
  return async (request, signal) => {
    if (delayMs > 0) await sleep(delayMs, undefined, { signal });
    return { content: "ok", toolCalls: [], usage: { promptTokens: 12, completionTokens: 1 }, model: request.model, finishReason: "stop" };
  };
}

/** A model stub whose calls wait until {@link GatedModel.open}. */
export interface GatedModel {
  readonly callModel: CallModel;
  /** Waits as a call does, without a request: for a pipeline that makes no model call of its own. */
  pass(): Promise<void>;
  /** Resolves once `count` calls are held. */
  held(count: number): Promise<void>;
  open(): void;
}

/** Makes a {@link GatedModel}. */
export function gatedModel(): GatedModel {
  let waiting = 0;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const watchers: Array<{ count: number; resolve: () => void }> = [];
  const pass = async () => {
    waiting++;
    for (const w of watchers.filter((x) => waiting >= x.count)) w.resolve();
    await gate;
    waiting--;
  };
  return {
    callModel: async (request) => {
      await pass();
      return { content: "ok", toolCalls: [], usage: { promptTokens: 12, completionTokens: 1 }, model: request.model, finishReason: "stop" };
    },
    pass,
    held: (count) => (waiting >= count ? Promise.resolve() : new Promise<void>((resolve) => watchers.push({ count, resolve }))),
    open: () => release(),
  };
}

/** A submitter on its own NATS connection: submits on `<root>.tasks.submit`, waits for `<root>.tasks.<id>.result`. */
export interface Submitter {
  /** The submitter's bus (its own connection). */
  readonly client: NatsBus;
  /** Submits `count` tasks at once; resolves when every result has arrived. Tasks per second. */
  throughput(count: number): Promise<number>;
  /** Submits `count` tasks at once; resolves when every submission is answered (not when the tasks end). */
  submitAll(count: number): Promise<Promise<void>[]>;
  /** Submits one task and waits for its result; ms. */
  latency(): Promise<number>;
  stop(): Promise<void>;
}

/** A running pipeline with its submitter. */
export interface Pipeline extends Submitter {
  readonly subjects: Subjects;
  readonly transport: OpenTransport;
}

/** What a submitter submits: a template and its inputs. */
export interface SubmittedTask {
  xml: string;
  inputs: Record<string, unknown>;
}

/** Options of {@link startPipeline}. */
export interface PipelineOptions {
  /** Every role's concurrency (the Handler's model sessions at once among them). */
  concurrency: number;
  callModel: CallModel;
  /** The Evaluator's Handler calls of one task at once (`DIRIGENT_TASK_PARALLELISM`); the default's when absent. */
  taskParallelism?: number;
  /** What the submitter submits; {@link TRIVIAL_TASK} by default. */
  task?: SubmittedTask;
}

/** Starts the roles (concurrency `concurrency` each) and a submitter on the server at `url`. */
export async function startPipeline(url: string, options: PipelineOptions): Promise<Pipeline> {
  const root = randomRoot();
  const subjects = createSubjects(root);
  const defaults = loadConfig({}, {});
  const config = {
    ...defaults,
    prefix: root,
    model: "stub",
    concurrency: options.concurrency,
    taskParallelism: options.taskParallelism ?? defaults.taskParallelism,
  };
  const transport = await openNatsTransport(url, subjects, { name: `bench-${root}`, log: silentLogger });
  const system: SystemHandle = await startSystem({ config, transport, callModel: options.callModel });
  const submitter = await startSubmitter(url, subjects, options.task);
  return {
    ...submitter,
    subjects,
    transport,
    async stop() {
      await submitter.stop();
      await system.stop();
      await transport.close();
    },
  };
}

/** Connects a {@link Submitter} of `task` (one trivial atomic task by default) for `subjects` to the server at `url`. */
export async function startSubmitter(
  url: string,
  subjects: Subjects,
  task: SubmittedTask = { xml: TRIVIAL_TASK, inputs: {} },
): Promise<Submitter> {
  const client = new NatsBus(await connectNats({ servers: url, name: `bench-client-${subjects.submit}` }), {
    onError: (err) => console.error(err),
  });
  const waiting = new Map<string, (outcome: TaskOutcome) => void>();
  const results = client.subscribe(subjects.anyTaskResult, (msg) => {
    const decoded = decode(TaskOutcome, msg.data);
    if (!decoded.ok) return;
    if (decoded.value.status !== "COMPLETE")
      console.error(`task ${decoded.value.taskId} ${decoded.value.status}: ${decoded.value.error?.message ?? ""}`);
    waiting.get(decoded.value.taskId)?.(decoded.value);
  });
  await client.flush();

  /** Submits one task; resolves once it is accepted, with the wait for its result (wrapped: a promise would be adopted). */
  const accepted = async (): Promise<{ done: Promise<void> }> => {
    const taskId = `b-${randomUUID()}`;
    const result = new Promise<TaskOutcome>((resolve) => waiting.set(taskId, resolve));
    const raw = await client.request(subjects.submit, encodeJson({ taskId, xml: task.xml, inputs: task.inputs }), { timeoutMs: 120_000 });
    const reply = decode(SubmitReply, raw);
    if (!reply.ok || reply.value.status !== "accepted")
      throw new Error(`submission not accepted: ${reply.ok ? reply.value.status : new TextDecoder().decode(raw)}`);
    return { done: result.then(() => void waiting.delete(taskId)) };
  };
  const submit = async (): Promise<void> => {
    await (
      await accepted()
    ).done;
  };

  return {
    client,
    async throughput(count) {
      const start = performance.now();
      await Promise.all(Array.from({ length: count }, submit));
      return count / ((performance.now() - start) / 1000);
    },
    async submitAll(count) {
      const waits = await Promise.all(Array.from({ length: count }, accepted));
      return waits.map((w) => w.done);
    },
    async latency() {
      const start = performance.now();
      await submit();
      return performance.now() - start;
    },
    async stop() {
      await results.unsubscribe();
      await client.close();
    },
  };
}
