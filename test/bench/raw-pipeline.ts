/**
 * The transport's own cost for workloads 1–2: the messages one trivial dirigent task sends and stores, written by
 * hand with nats.js' core, JetStream and KV clients as a user would, with no runtime: no machines, no templates, no
 * schema checks, no leases or checkpoints. The same submitter ({@link startSubmitter}) drives it.
 *
 * Per task, as dirigent: the submission request and its answer; the intake publish with a message id (stored on a
 * work-queue stream, file storage) beside a duplicate check (a KV get); its delivery from a durable pull consumer;
 * five events and the result, stored by an events stream; the turn record (not awaited) and the final record (awaited)
 * in two KV buckets; the ack. What it does not do: validate or parse anything, hold a claim, write a checkpoint, keep
 * a task actor, reply to `get`, or survive a crash as dirigent does (a redelivered item would simply run again).
 */
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, nanos, type NatsConnection } from "@nats-io/transport-node";
import { createSubjects, type Subjects } from "../../protocol/index.js";
import { connectNats } from "../../runtime/nats/bus.js";
import { openWorkQueue } from "../../runtime/nats/queue.js";
import { wireOf } from "../../runtime/nats/wire.js";
import { randomRoot } from "../support/nats-server.js";
import { startSubmitter, type Submitter } from "./pipeline.js";

/**
 * How the hand-written pipeline reaches JetStream. `clients`: nats.js' JetStream and KV clients (`js.publish`, `kv.get`,
 * `kv.put`, `consumer.consume`) on a connection with the client's defaults. `wire`: dirigent's own transport
 * (`runtime/nats/wire.ts` writes and direct gets on one reply subscription, the `runtime/nats/queue.ts` pull), the
 * floor under dirigent's roles.
 */
export type RawIo = "clients" | "wire";

/** What the pipeline needs from JetStream. */
interface Io {
  /** Stores the submission on the intake stream (with a message id) and reads the task bucket beside it. */
  intake(subject: string, data: Uint8Array, taskId: string): Promise<unknown>;
  put(bucket: "tasks" | "turns", key: string, data: Uint8Array): Promise<unknown>;
  /** Runs each delivery of the intake, at most `concurrency` at once; returns the stop. */
  consume(run: (data: Uint8Array) => Promise<void>, concurrency: number): Promise<() => Promise<void>>;
}

const json = (value: unknown): Uint8Array => Buffer.from(JSON.stringify(value));

/**
 * Starts the hand-written pipeline (at most `concurrency` tasks in flight) and a submitter on the server at `url`.
 * `model`: awaited where a dirigent task makes its model call (none by default: the answer is there at once).
 */
export async function startRawPipeline(
  url: string,
  options: { concurrency: number; io: RawIo; model?: () => Promise<unknown> },
): Promise<Submitter> {
  const root = randomRoot();
  const subjects = createSubjects(root);
  const nc: NatsConnection =
    options.io === "wire"
      ? await connectNats({ servers: url, name: `bench-raw-${root}` })
      : await connect({ servers: url, name: `bench-raw-${root}` });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: subjects.eventsStream,
    subjects: [subjects.anyTaskEvents, subjects.anyTaskResult],
    storage: StorageType.File,
    max_age: nanos(24 * 60 * 60 * 1000),
  });
  const io = options.io === "wire" ? await wireIo(nc, subjects, options.concurrency) : await clientsIo(nc, subjects, options.concurrency);

  let seq = 0;
  const event = (taskId: string, type: string, state: string) =>
    nc.publish(
      subjects.taskEvents(taskId),
      json({ taskId, seq: ++seq, type, state, at: new Date().toISOString(), message: `${type} ${taskId}` }),
    );

  const submissions = nc.subscribe(subjects.submit, {
    callback: (err, msg) => {
      if (err) return;
      void (async () => {
        const { taskId } = JSON.parse(msg.string()) as { taskId: string };
        await io.intake(subjects.intake(taskId), msg.data, taskId);
        msg.respond(json({ taskId, status: "accepted" }));
        event(taskId, "task.queued", "queued");
      })().catch((error: unknown) => console.error("raw submission", error));
    },
  });

  const stopConsuming = await io.consume(async (data) => {
    const { taskId } = JSON.parse(Buffer.from(data).toString("utf8")) as { taskId: string };
    event(taskId, "task.running", "running");
    event(taskId, "step.started", "running");
    if (options.model) await options.model();
    event(taskId, "model.turn", "running");
    const content = "ok";
    void io
      .put("turns", `${taskId}.t1`, json({ taskId, turn: 1, content, usage: { promptTokens: 12, completionTokens: 1 } }))
      .catch(() => undefined);
    await io.put("tasks", taskId, json({ taskId, state: "completed", result: { taskId, status: "COMPLETE", content, notes: {} } }));
    event(taskId, "task.completed", "completed");
    nc.publish(subjects.taskResult(taskId), json({ taskId, status: "COMPLETE", content, notes: { model: "stub" } }));
  }, options.concurrency);

  const submitter = await startSubmitter(url, subjects);
  return {
    ...submitter,
    async stop() {
      await submitter.stop();
      submissions.unsubscribe();
      await stopConsuming();
      await nc.close();
    },
  };
}

/** The KV buckets of the task records and the turn records, created (file storage, history 1) under their names. */
async function buckets(nc: NatsConnection, subjects: Subjects) {
  const kvm = new Kvm(nc);
  const names = { tasks: `${subjects.intakeStream}_tasks`, turns: `${subjects.intakeStream}_turns` };
  const options = { history: 1, storage: StorageType.File };
  return { names, tasks: await kvm.create(names.tasks, options), turns: await kvm.create(names.turns, options) };
}

async function clientsIo(nc: NatsConnection, subjects: Subjects, concurrency: number): Promise<Io> {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: subjects.intakeStream,
    subjects: [subjects.anyIntake],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(120_000),
  });
  // At most `concurrency` deliveries unacknowledged: the bound dirigent's roles have as their concurrency.
  await jsm.consumers.add(subjects.intakeStream, {
    durable_name: "workers",
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(30_000),
    max_ack_pending: concurrency,
  });
  const kv = await buckets(nc, subjects);
  const js = jetstream(nc);
  return {
    intake: (subject, data, taskId) => Promise.all([js.publish(subject, data, { msgID: taskId }), kv.tasks.get(taskId)]),
    put: (bucket, key, data) => kv[bucket].put(key, data),
    async consume(run, max) {
      const messages = await (await js.consumers.get(subjects.intakeStream, "workers")).consume({ max_messages: max });
      const consuming = (async () => {
        for await (const m of messages)
          void run(m.data).then(
            () => m.ack(),
            (error: unknown) => console.error("raw task", error),
          );
      })();
      return async () => {
        await messages.close();
        await consuming;
      };
    },
  };
}

async function wireIo(nc: NatsConnection, subjects: Subjects, concurrency: number): Promise<Io> {
  const queue = await openWorkQueue(nc, subjects, { maxAckPending: concurrency });
  const { names } = await buckets(nc, subjects);
  const wire = wireOf(nc);
  return {
    intake: (subject, data, taskId) =>
      Promise.all([wire.store(subject, data, { msgId: taskId }), wire.lastBySubject(`KV_${names.tasks}`, `$KV.${names.tasks}.${taskId}`)]),
    put: (bucket, key, data) => wire.store(`$KV.${names[bucket]}.${key}`, data),
    async consume(run, max) {
      const sub = queue.consume(
        async (item) => {
          await run(item.data);
          await item.ack();
        },
        { concurrency: max },
      );
      return async () => void (await sub.unsubscribe());
    },
  };
}
