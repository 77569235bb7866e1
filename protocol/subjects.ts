/**
 * The only module that spells NATS subjects, queue groups, stream and bucket names.
 * Everything hangs off one root (default `dirigent`), so several deployments can share a server.
 */
import { InvalidSubjectError } from "./errors.js";
import { TASK_ID_PATTERN } from "./ids.js";

/** The default subject root. */
export const DEFAULT_ROOT = "dirigent";

/**
 * The header by which a JetStream stream keeps one copy of a message sent more than once within its duplicate window,
 * whether it came as a JetStream write or as a plain publish.
 */
export const MSG_ID_HEADER = "Nats-Msg-Id";

/**
 * The header of a request one Handler passed on to another with a free slot (its value: the ids of the Handlers that
 * passed it, comma-separated, first first). A request that carries it is not passed on arrival again; while it waits
 * for a slot, a peer reporting a free one may still take it (actors/handler/peers.ts).
 */
export const FORWARDED_HEADER = "Dirigent-Forwarded";

/**
 * The header by which a raw XML submission on `<root>.tasks.submit` chooses its task id (a JSON submission has its
 * `taskId` field, which wins): `nats req -H Dirigent-Task-Id:hello-1 dirigent.tasks.submit '<task>…</task>'`.
 */
export const TASK_ID_HEADER = "Dirigent-Task-Id";

const ROOT_TOKEN = /^[a-z0-9_-]+$/;

/** Checks a subject root such as `dirigent` or `acme.dirigent`; throws {@link InvalidSubjectError} naming the bad token. */
export function checkRoot(root: string): string {
  if (root.length === 0) throw new InvalidSubjectError("subject root is empty", root);
  for (const token of root.split(".")) {
    if (!ROOT_TOKEN.test(token)) {
      throw new InvalidSubjectError(`illegal subject root token '${token}': use lowercase [a-z0-9_-], tokens separated by '.'`, token);
    }
  }
  return root;
}

function idToken(id: string): string {
  if (!TASK_ID_PATTERN.test(id)) throw new InvalidSubjectError(`illegal task id token '${id}'`, id);
  return id;
}

/** All subjects and names of one deployment. */
export type Subjects = ReturnType<typeof createSubjects>;

/**
 * Builds every subject for the given root.
 * @example createSubjects("dirigent").taskEvents("t1") // "dirigent.tasks.t1.events"
 */
export function createSubjects(root: string = DEFAULT_ROOT) {
  checkRoot(root);
  const upper = root.toUpperCase().replace(/[.-]/g, "_");
  const rootDepth = root.split(".").length;
  return {
    root,
    /** Public: submit a task (request/reply or publish). */
    submit: `${root}.tasks.submit`,
    /** Public: lifecycle events of a task. */
    taskEvents: (id: string) => `${root}.tasks.${idToken(id)}.events`,
    /** Public: the final result of a task. */
    taskResult: (id: string) => `${root}.tasks.${idToken(id)}.result`,
    /** Public: request the state and result of a task. */
    taskGet: (id: string) => `${root}.tasks.${idToken(id)}.get`,
    /** Public: the answer to a task's pending `request_user_input` ({@link UserInput}). */
    taskInput: (id: string) => `${root}.tasks.${idToken(id)}.input`,
    /** Public: request cancellation of a task. */
    taskCancel: (id: string) => `${root}.tasks.${idToken(id)}.cancel`,
    /** Public: request the list of a task's node records ({@link NodeListReply}). */
    taskNodes: (id: string) => `${root}.tasks.${idToken(id)}.nodes`,
    /** Public: request one node's record with its conversations ({@link NodeDetailReply}). */
    taskNode: (id: string) => `${root}.tasks.${idToken(id)}.node`,
    /** Public: fork a finished task from one of its nodes ({@link RerunRequest}). */
    taskRerun: (id: string) => `${root}.tasks.${idToken(id)}.rerun`,
    /** Wildcard over every task's `rerun` subject (Directors subscribe to it). */
    anyTaskRerun: `${root}.tasks.*.rerun`,
    /** Wildcard over every task's `nodes` subject (Directors subscribe to it). */
    anyTaskNodes: `${root}.tasks.*.nodes`,
    /** Wildcard over every task's `node` subject. */
    anyTaskNode: `${root}.tasks.*.node`,
    /** Wildcard over every task's `get` subject (Directors subscribe to it). */
    anyTaskGet: `${root}.tasks.*.get`,
    /** Wildcard over every task's `cancel` subject. */
    anyTaskCancel: `${root}.tasks.*.cancel`,
    /** Wildcard over every task's `input` subject (an Evaluator subscribes to one task's only, while it waits). */
    anyTaskInput: `${root}.tasks.*.input`,
    /** Wildcard over every task's events. */
    anyTaskEvents: `${root}.tasks.*.events`,
    /** Wildcard over every task's results. */
    anyTaskResult: `${root}.tasks.*.result`,
    /** Extracts the task-id token from a `<root>.tasks.<id>.<channel>` subject. */
    taskIdOf: (subject: string): string | undefined => subject.split(".")[rootDepth + 1],
    /** Internal: accepted submissions (JetStream work queue). */
    intake: (id: string) => `${root}.intake.${idToken(id)}`,
    /** Internal: wildcard of the intake stream. */
    anyIntake: `${root}.intake.*`,
    /** Internal: Director → Evaluator. */
    evaluate: `${root}.evaluator.evaluate`,
    /** Internal: Evaluator → Handler (atomic tasks). */
    execute: `${root}.handler.execute`,
    /** Internal: Evaluator → Handler (commands of `script` tasks and loops). */
    script: `${root}.handler.script`,
    /** Internal: each Handler's free slots ({@link HandlerLoad}), published every second, read by the other Handlers. */
    handlerLoad: `${root}.handler.load`,
    /** Internal: one Handler's own subject of `kind` requests, where a busy Handler passes a request on to it. */
    handlerDirect: (handler: string, kind: "execute" | "script") => `${root}.handler.direct.${idToken(handler)}.${kind}`,
    /** Internal: wildcard of every Handler's own subjects. */
    anyHandlerDirect: `${root}.handler.direct.>`,
    /** Internal: Evaluator → Memory. */
    memoryMatch: `${root}.memory.match`,
    /** Public: turn a request in words into a validated template, or decompose a failed node. */
    compile: `${root}.compiler.compile`,
    /** Internal: progress of a task from Evaluators and Handlers. */
    progress: (id: string) => `${root}.progress.${idToken(id)}`,
    /** Internal: wildcard of all progress reports. */
    anyProgress: `${root}.progress.*`,
    /** Internal: cancellation broadcast. */
    cancelBroadcast: `${root}.control.cancel`,
    /** Internal: wildcard of every control subject (cancel, abort, superseded, goals), which every role hears. */
    anyControl: `${root}.control.>`,
    /** Internal: a Handler stops the session or script of one node ({@link NodeAbort}). */
    nodeAbort: `${root}.control.abort`,
    /** Queue group shared by all processes of a role. */
    queue: (role: "director" | "evaluator" | "handler" | "memory" | "compiler" | "supervisor") => `${root}.${role}`,
    /** JetStream stream holding accepted submissions. */
    intakeStream: `${upper}_INTAKE`,
    /** JetStream stream holding task events and results, for replay. */
    eventsStream: `${upper}_EVENTS`,
    /** KV bucket of task records. */
    tasksBucket: `${upper}_TASKS`,
    /** KV bucket of recorded Handler turns and script outcomes (resume without repeating model calls). */
    turnsBucket: `${upper}_TURNS`,
    /**
     * KV bucket of message bodies larger than one NATS message (a request carrying a large template or input), sent
     * by reference: the message carries the key in the `Dirigent-Body` header (runtime/nats/chunks.ts).
     */
    bodiesBucket: `${upper}_BODIES`,
    /** Inspection: messages about XState actors of one role (`kind`: actor, event, snapshot, microstep); see protocol/inspect.ts. */
    inspect: (role: string, kind: string) => `${root}.inspect.${role}.${kind}`,
    /** Inspection: wildcard of all inspection messages (`dirigent inspect` subscribes to it). */
    anyInspect: `${root}.inspect.>`,
    /** Inspection: wildcard of one role's inspection messages (the role's NATS user may publish only these). */
    anyInspectOf: (role: string) => `${root}.inspect.${role}.>`,
    /** Internal: an Evaluator took over a task's evaluation; others running it for an older owner stop. */
    superseded: `${root}.control.superseded`,
    /** Internal: a Director that took a task over tells the Director whose claim it replaced ({@link TakeoverNotice}). */
    directorTakeover: (owner: string) => `${root}.director.${idToken(owner)}.takeover`,
    /** Internal: wildcard of every Director's takeover subject. */
    anyDirectorTakeover: `${root}.director.*.takeover`,
    /** KV bucket of the global file-metadata index (Memory). */
    indexBucket: `${upper}_INDEX`,
    /** Public: submit an autonomous goal ({@link GoalSubmitRequest}); Supervisors answer. */
    goalsSubmit: `${root}.goals.submit`,
    /** Public: list the goals. */
    goalsList: `${root}.goals.list`,
    /** Public: a goal with its sub-goals and evaluations. */
    goalGet: (id: string) => `${root}.goals.${idToken(id)}.get`,
    /** Public: resume a paused goal (resets its replan count). */
    goalResume: (id: string) => `${root}.goals.${idToken(id)}.resume`,
    /** Public: cancel a goal and every task of its tree. */
    goalCancel: (id: string) => `${root}.goals.${idToken(id)}.cancel`,
    /** Public: events of a goal. */
    goalEvents: (id: string) => `${root}.goals.${idToken(id)}.events`,
    /** Wildcard over every goal's events. */
    anyGoalEvents: `${root}.goals.*.events`,
    /** Wildcard over every goal's request subjects (Supervisors serve them). */
    anyGoalRequest: (verb: "get" | "resume" | "cancel") => `${root}.goals.*.${verb}`,
    /** Extracts the goal-id token from a `<root>.goals.<id>.<verb>` subject. */
    goalIdOf: (subject: string): string | undefined => subject.split(".")[rootDepth + 1],
    /** Public: alerts for operators (escalated goals, major replans). */
    operatorAlerts: `${root}.operator.alerts`,
    /** Internal: a Supervisor asks the others to stop a goal's loop (cancel, pause). */
    goalControl: `${root}.control.goals`,
    /** KV bucket of goals and Supervisor leases. */
    goalsBucket: `${upper}_GOALS`,
    /** Public: liveness ping (`PingRequest`, protocol/health.ts); every runtime process answers, no queue group. */
    ping: `${root}.ping`,
    /** Tools: the subjects of NATS service endpoints the Handler calls as tools (`<root>.tools.<name>`, docs/tools.md). */
    anyTool: `${root}.tools.>`,
    /** Tools: the start every tool endpoint's subject must have. */
    toolPrefix: `${root}.tools.`,
    /** Tools: the subject space of tool service `service` (`<root>.tools.<service>.>`), where its endpoints are. */
    toolServiceSubjects: (service: string) => `${root}.tools.${service}.>`,
    /** The NATS service protocol's discovery subjects (not under the root: every service answers them). */
    serviceInfo: "$SRV.INFO",
    /** Discovery of one service by name (`$SRV.INFO.<service>`): answered by that service's instances only. */
    serviceInfoOf: (service: string) => `$SRV.INFO.${service}`,
    /** Every service's own discovery subject (`$SRV.INFO.*`). */
    anyServiceInfo: "$SRV.INFO.*",
    servicePing: "$SRV.PING",
    /** Discovery requests to every service (`$SRV.<verb>`: `PING`, `INFO`, `STATS`). */
    anyServiceDiscovery: "$SRV.*",
    /** Discovery requests to one service by name (`$SRV.<verb>.<service>`). */
    serviceDiscoveryOf: (service: string) => `$SRV.*.${service}`,
    /** Discovery requests to one instance of a service (`$SRV.<verb>.<service>.<id>`). */
    serviceInstanceDiscoveryOf: (service: string) => `$SRV.*.${service}.*`,
    /** Durable consumer name of Directors on the intake stream. */
    directorConsumer: "directors",
  } as const;
}

/**
 * The inbox prefix of a connection that names none: its replies come to `_INBOX.<id>`, which any user allowed
 * `_INBOX.>` could read.
 */
export const DEFAULT_INBOX_PREFIX = "_INBOX";

/**
 * An inbox prefix of its own for `name` (a NATS user, a role): `_INBOX_<name>`, one subject token (dots become `:`), so
 * that no one's inboxes lie under another's.
 */
export function ownInboxPrefix(name: string): string {
  return `${DEFAULT_INBOX_PREFIX}_${name.replace(/\./g, ":")}`;
}

/** Every inbox under `prefix` (`<prefix>.>`). */
export function inboxesOf(prefix: string): string {
  return `${prefix}.>`;
}

/**
 * The subjects of nats-server's JetStream API that dirigent's roles use, and those of its key-value buckets and acks
 * (not under the root: the server's own, per account). The permissions of each role allow exactly these
 * (runtime/nats/conf/permissions.ts).
 */
export const jetStreamApi = {
  /** Every JetStream API request (a root's admin). */
  any: "$JS.API.>",
  /** The account's JetStream information. */
  info: "$JS.API.INFO",
  /** A stream's state and configuration (with a subjects filter: its subjects). */
  streamInfo: (stream: string) => `$JS.API.STREAM.INFO.${stream}`,
  /** One message of a stream, by sequence or by last on a subject. */
  streamMsgGet: (stream: string) => `$JS.API.STREAM.MSG.GET.${stream}`,
  /** Deleting one message of a stream. */
  streamMsgDelete: (stream: string) => `$JS.API.STREAM.MSG.DELETE.${stream}`,
  /** Purging a stream (or the messages of a subject filter). */
  streamPurge: (stream: string) => `$JS.API.STREAM.PURGE.${stream}`,
  /** Direct get of the last message on `subject` (`>`: any) from a stream made with `allow_direct`. */
  directGet: (stream: string, subject: string) => `$JS.API.DIRECT.GET.${stream}.${subject}`,
  /** A consumer's state. */
  consumerInfo: (stream: string, consumer: string) => `$JS.API.CONSUMER.INFO.${stream}.${consumer}`,
  /** The next messages of a pull consumer. */
  consumerNext: (stream: string, consumer: string) => `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
  /** The acknowledgements of a stream's consumers' messages. */
  acks: (stream: string) => `$JS.ACK.${stream}.>`,
  /** The stream behind key-value bucket `bucket`. */
  bucketStream: (bucket: string) => `KV_${bucket}`,
  /** The subject of `key` in key-value bucket `bucket` (`>`: every key). */
  bucketKey: (bucket: string, key: string) => `$KV.${bucket}.${key}`,
} as const;
