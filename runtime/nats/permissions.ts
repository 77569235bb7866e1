/**
 * The one place the NATS users and per-role permissions of a deployment are defined. `renderAuthorization` writes
 * the nats-server `authorization { users = [...] }` block for a subject root (`dirigent nats-conf`); the repository's
 * `nats.conf` holds its output for the default root, and a test fails when it is stale.
 *
 * Each role may publish and subscribe only where it must, JetStream API subjects included. Every user has a name of
 * its own (`submitter` for the default root, `<root>-submitter` for any other, see {@link natsUser}) and an inbox prefix
 * of its own (`_INBOX_<user>`, see {@link userInboxPrefix}), so that no other user, of this root or another one on the
 * same server, can read its replies (JetStream API answers carry task records). A role may publish into the inboxes of
 * those who send it requests: not through `allow_responses`, which allows one reply per request by default, while a
 * responder also sends keepalives (`KEEPALIVE_HEADER`). Several roots' users go into one block
 * (`renderAuthorization([a, b])`): nats-server 2.9 allows no `accounts {}` block next to `authorization { users }`
 * (CVE-2023-47090).
 */
import { createSubjects, DEFAULT_ROOT } from "../../protocol/index.js";
import { list, quote } from "./conf-syntax.js";
import { renderToolServiceUsers } from "./tool-service-users.js";

/** The NATS users of a deployment: the four runtime roles, clients that submit work, and read-only inspectors. */
export const NATS_ROLES = ["submitter", "director", "evaluator", "handler", "memory", "supervisor", "inspector"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

/** What one user may do. */
export interface RolePermissions {
  publish: string[];
  subscribe: string[];
}

/**
 * The roles that run actors. A new one goes here and in {@link NATS_ROLES}, with its own entry in `ownPermissions`;
 * it then also gets what every runtime role shares (`runtimeCommon`: its inspection subjects) and an inbox of its own.
 */
const RUNTIME_ROLES: readonly string[] = ["director", "evaluator", "handler", "memory", "supervisor"];

/**
 * The NATS user of a role of subject root `root`: the role's name for the default root (`handler`, as before roots
 * could share a server), `<root>-<role>` for any other (`acme-handler`), so that the users of several roots fit in one
 * server's configuration.
 */
export function natsUser(root: string, role: NatsRole | "admin"): string {
  return root === DEFAULT_ROOT ? role : `${root}-${role}`;
}

/**
 * The inbox prefix of user `user`: `_INBOX_<user>`, one subject token (a root's dots become `:`, which no root
 * contains), so that no user's inboxes lie under another's; `undefined` for a name that cannot be part of a subject.
 * @example userInboxPrefix("acme.prod-submitter") // "_INBOX_acme:prod-submitter"
 */
export function userInboxPrefix(user: string): string | undefined {
  return /^[A-Za-z0-9_\-.:]+$/.test(user) ? `_INBOX_${user.replace(/\./g, ":")}` : undefined;
}

/**
 * The inbox prefix of a connection: that of its user ({@link userInboxPrefix}) when it logs in with a user name;
 * without one, `_INBOX_<role>` for a process running exactly one runtime role, else `_INBOX`.
 */
export function inboxPrefixFor(roles: readonly string[] | undefined, user?: string): string {
  const own = user === undefined ? undefined : userInboxPrefix(user);
  if (own !== undefined) return own;
  const only = roles?.length === 1 ? roles[0] : undefined;
  return only !== undefined && RUNTIME_ROLES.includes(only) ? `_INBOX_${only}` : "_INBOX";
}

/**
 * The server-side variable (or environment variable) holding a user's password: `DIRIGENT_NATS_HANDLER_PASSWORD` for
 * the default root, `DIRIGENT_NATS_ACME_HANDLER_PASSWORD` for root `acme` (dots and dashes become `_`).
 */
export function passwordVariable(role: NatsRole | "dev" | "admin", root: string = DEFAULT_ROOT): string {
  const user = role === "dev" ? role : natsUser(root, role);
  return `DIRIGENT_NATS_${user.toUpperCase().replace(/[.-]/g, "_")}_PASSWORD`;
}

const API = "$JS.API";
/** Look up and create a stream (`ensureStream`, `Kvm.create`). */
const streamSetup = (stream: string) => [`${API}.STREAM.INFO.${stream}`, `${API}.STREAM.CREATE.${stream}`];
/**
 * Open, read and write a KV bucket. Reads use direct get by subject (`DIRECT.GET.<stream>.<subject>`, 2.9) on buckets
 * created with `allow_direct`, as the runtime creates them; `STREAM.MSG.GET` on a bucket made without it.
 */
const kvReadWrite = (bucket: string) => [
  ...streamSetup(`KV_${bucket}`),
  `$KV.${bucket}.>`,
  `${API}.DIRECT.GET.KV_${bucket}.>`,
  `${API}.STREAM.MSG.GET.KV_${bucket}`,
];
/** A bucket of a `NatsTaskStore`: read and write, and purge the chunks of a large value once replaced (runtime/nats/chunks.ts). */
const kvStore = (bucket: string) => [...kvReadWrite(bucket), `${API}.STREAM.PURGE.KV_${bucket}`];
/** Watch a KV bucket: an ordered push consumer (`CONSUMER.CREATE.<stream>.<name>.<filter>`), recreated after a gap. */
const kvWatch = (bucket: string) => [
  `${API}.CONSUMER.CREATE.KV_${bucket}.>`,
  `${API}.CONSUMER.DELETE.KV_${bucket}.>`,
  `${API}.CONSUMER.INFO.KV_${bucket}.>`,
];

/** Read the events stream without side effects: its state and its messages by sequence or by subject (`STREAM.MSG.GET`). */
const streamRead = (stream: string) => [`${API}.STREAM.INFO.${stream}`, `${API}.STREAM.MSG.GET.${stream}`];

/** The subjects of the inboxes of a role's user of root `root` (`_INBOX_<user>.>`). */
const inboxOf = (root: string, role: NatsRole | "admin") => `${userInboxPrefix(natsUser(root, role))}.>`;

/**
 * What every runtime role may do besides its own subjects: publish its actors' inspection messages
 * (`<root>.inspect.<role>.<kind>`, when `DIRIGENT_INSPECT` is on), under its own role name only; answer pings
 * (`<root>.ping`: every process answers, into the inbox of the submitter or of the runtime role that asks) and ping;
 * read and write the bodies bucket (a request or answer larger than one message, runtime/nats/chunks.ts).
 */
const runtimeCommon = (root: string, role: string): RolePermissions => ({
  publish: [
    `${root}.inspect.${role}.>`,
    `${root}.ping`,
    ...(["submitter", ...RUNTIME_ROLES] as NatsRole[]).map((r) => inboxOf(root, r)),
    ...kvStore(createSubjects(root).bodiesBucket),
  ],
  subscribe: [`${root}.ping`],
});

/** `base` with `extra` appended (a role's own permissions plus those every runtime role shares), each subject once. */
const withCommon = (base: RolePermissions, extra: RolePermissions): RolePermissions => ({
  publish: [...new Set([...base.publish, ...extra.publish])],
  subscribe: [...new Set([...base.subscribe, ...extra.subscribe])],
});

/** The permissions of every role for subject root `root`. */
export function rolePermissions(root: string): Record<NatsRole, RolePermissions> {
  const own = ownPermissions(root);
  return Object.fromEntries(
    NATS_ROLES.map((role) => [role, RUNTIME_ROLES.includes(role) ? withCommon(own[role], runtimeCommon(root, role)) : own[role]]),
  ) as Record<NatsRole, RolePermissions>;
}

/** Each role's own permissions, without those every runtime role shares ({@link runtimeCommon}). */
function ownPermissions(root: string): Record<NatsRole, RolePermissions> {
  const s = createSubjects(root);
  const inbox = (role: NatsRole) => inboxOf(root, role);
  /** The submitter's inbox: the answers to submit, get, cancel, input, compile and the goal API. */
  const clients = inbox("submitter");
  const control = `${root}.control.>`;
  /** The goal API (served by Supervisors) and what it publishes. */
  const goalRequests = [s.goalsSubmit, s.goalsList, s.anyGoalRequest("get"), s.anyGoalRequest("resume"), s.anyGoalRequest("cancel")];
  const goalEvents = s.anyGoalEvents;
  return {
    submitter: {
      publish: [
        s.submit,
        s.anyTaskGet,
        s.anyTaskCancel,
        `${root}.tasks.*.input`,
        s.compile,
        ...goalRequests,
        s.ping,
        ...kvStore(s.bodiesBucket),
      ],
      subscribe: [s.anyTaskEvents, s.anyTaskResult, goalEvents, s.operatorAlerts, inbox("submitter")],
    },
    director: {
      publish: [
        clients,
        // Supervisors submit, look up and cancel the tasks of their goals; inspectors look tasks up.
        inbox("supervisor"),
        inbox("inspector"),
        s.anyTaskEvents,
        s.anyTaskResult,
        s.cancelBroadcast,
        s.evaluate,
        s.compile,
        s.anyIntake,
        `${API}.INFO`,
        ...kvStore(s.tasksBucket),
        ...streamSetup(s.intakeStream),
        ...streamSetup(s.eventsStream),
        // The last message of a subject (`lastPublished`): is a redelivered final task's result stored, or did its old
        // owner die before publishing it? How far did a task running under a pending claim get (its last event)?
        `${API}.STREAM.MSG.GET.${s.eventsStream}`,
        `${API}.CONSUMER.INFO.${s.intakeStream}.${s.directorConsumer}`,
        // Created and updated (ack wait) through the 2.9 API: CONSUMER.CREATE.<stream>.<name>.
        `${API}.CONSUMER.CREATE.${s.intakeStream}.${s.directorConsumer}`,
        `${API}.CONSUMER.MSG.NEXT.${s.intakeStream}.${s.directorConsumer}`,
        // A queued task's record is its intake item: looked up by subject (status, cancel), removed when cancelled.
        `${API}.DIRECT.GET.${s.intakeStream}.>`,
        `${API}.STREAM.MSG.GET.${s.intakeStream}`,
        `${API}.STREAM.MSG.DELETE.${s.intakeStream}`,
        `$JS.ACK.${s.intakeStream}.>`,
      ],
      subscribe: [s.submit, s.anyTaskGet, s.anyTaskCancel, s.anyProgress, control, inbox("director")],
    },
    evaluator: {
      // The turns bucket: the outcomes of waits for the user's input (actors/evaluator/input.ts).
      publish: [
        inbox("director"),
        clients,
        s.anyProgress,
        s.execute,
        s.script,
        s.memoryMatch,
        s.compile,
        s.superseded,
        s.nodeAbort,
        `${API}.INFO`,
        ...kvStore(s.turnsBucket),
      ],
      subscribe: [s.evaluate, `${root}.tasks.*.input`, control, inbox("evaluator")],
    },
    handler: {
      // Tools of NATS services: discovery (`$SRV.INFO`, `$SRV.PING`) and calls of endpoints under `<root>.tools.>`.
      publish: [
        inbox("evaluator"),
        inbox("director"),
        clients,
        s.anyProgress,
        `${API}.INFO`,
        ...kvStore(s.turnsBucket),
        s.serviceInfo,
        // One service's own discovery subject (`$SRV.INFO.<service>`), which only that service's user may receive.
        s.anyServiceInfo,
        s.servicePing,
        s.anyTool,
        // Free slots reported, and requests passed on to a Handler with one free (actors/handler/peers.ts).
        s.handlerLoad,
        s.anyHandlerDirect,
      ],
      subscribe: [s.execute, s.script, s.compile, s.handlerLoad, s.anyHandlerDirect, control, inbox("handler")],
    },
    memory: {
      // The index is written by `dirigent memory index` (as this user), which purges replaced generations.
      publish: [
        inbox("evaluator"),
        `${API}.INFO`,
        ...kvReadWrite(s.indexBucket),
        ...kvWatch(s.indexBucket),
        `${API}.STREAM.PURGE.KV_${s.indexBucket}`,
      ],
      subscribe: [s.memoryMatch, control, inbox("memory")],
    },
    // Runs goals: submits their tasks like a client, keeps goals and leases in the goals bucket (listing its keys
    // is an ordered consumer, as a KV watch), and answers the goal API.
    supervisor: {
      publish: [
        clients,
        s.submit,
        s.anyTaskGet,
        s.anyTaskCancel,
        goalEvents,
        s.operatorAlerts,
        s.goalControl,
        `${API}.INFO`,
        ...kvStore(s.goalsBucket),
        ...kvWatch(s.goalsBucket),
      ],
      subscribe: [...goalRequests, s.goalControl, s.anyTaskResult, inbox("supervisor")],
    },
    // Read-only: it watches the inspection messages and the tasks' events, asks for a task's record, and replays
    // finished tasks from the events stream (runtime/inspect/replay.ts); it creates no consumer.
    inspector: {
      publish: [s.anyTaskGet, ...streamRead(s.eventsStream)],
      subscribe: [s.anyInspect, s.anyTaskEvents, s.anyTaskResult, inbox("inspector")],
    },
  };
}

/** Options of {@link renderAuthorization}. */
export interface RenderOptions {
  /**
   * Values of the password variables, written into the file. Without them each password is read from the server's
   * environment (`$DIRIGENT_NATS_<ROLE>_PASSWORD`, see {@link passwordVariable}), which is how production should run.
   */
  variables?: Partial<Record<string, string>>;
  /**
   * Add a user `dev` that may do anything, and let clients without credentials in as `dev` (`no_auth_user`).
   * For the development server only.
   */
  devUser?: boolean;
  /**
   * Add a user `admin` (`<root>-admin` for another root) for operators: the JetStream API only (`nats stream edit
   * --replicas 3`, `nats stream ls`) of every root on the server, no application subjects. Its password comes from
   * `$DIRIGENT_NATS_ADMIN_PASSWORD` (`$DIRIGENT_NATS_<ROOT>_ADMIN_PASSWORD`).
   */
  admin?: boolean;
  /**
   * Tool services to add a user for, under each root (`dirigent nats-conf --tool-service weather`):
   * see {@link renderToolServiceUsers}.
   */
  toolServices?: readonly string[];
}

/** One entry of the `users` list. */
const userEntry = (user: string, variable: string, p: RolePermissions) => [
  `    { user: ${/^[a-z0-9_]+$/.test(user) ? user : quote(user)}, password: $${variable}, permissions: {`,
  `        publish: { allow: ${list(p.publish)} }`,
  `        subscribe: { allow: ${list(p.subscribe)} }`,
  "    } }",
];

/**
 * The entries of the `users = [...]` list for the users of `root` (with `admin`, its admin), to paste into the list of
 * a server that already has users (`dirigent nats-conf --users`). With `devUser`, runtime roles may also answer
 * clients without credentials (the `dev` user's `_INBOX`).
 */
export function renderUsers(root: string, options: Pick<RenderOptions, "admin" | "devUser" | "toolServices"> = {}): string[] {
  const permissions = rolePermissions(root);
  const lines: string[] = [];
  for (const role of NATS_ROLES) {
    const p = permissions[role];
    const answersDev = options.devUser === true && RUNTIME_ROLES.includes(role);
    lines.push(
      ...userEntry(
        natsUser(root, role),
        passwordVariable(role, root),
        answersDev ? withCommon(p, { publish: ["_INBOX.>"], subscribe: [] }) : p,
      ),
    );
  }
  if (options.admin) {
    lines.push(
      ...userEntry(natsUser(root, "admin"), passwordVariable("admin", root), {
        publish: [`${API}.>`],
        subscribe: [inboxOf(root, "admin")],
      }),
    );
  }
  if (options.toolServices) lines.push(...renderToolServiceUsers(root, options.toolServices));
  return lines;
}

/**
 * Renders the `authorization` block (and, with `devUser`, `no_auth_user`) of nats-server's configuration, with the
 * users of every root in `roots`: roots that share a server go into one block (a second `authorization` block would
 * replace the first).
 * @example renderAuthorization("dirigent") // passwords from $DIRIGENT_NATS_<ROLE>_PASSWORD
 * @example renderAuthorization(["acme", "globex"]) // $DIRIGENT_NATS_ACME_<ROLE>_PASSWORD, $DIRIGENT_NATS_GLOBEX_<ROLE>_PASSWORD
 */
export function renderAuthorization(roots: string | readonly string[], options: RenderOptions = {}): string {
  const lines: string[] = [];
  const variables = Object.entries(options.variables ?? {}).filter((e): e is [string, string] => e[1] !== undefined);
  for (const [name, value] of variables) lines.push(`${name}: ${quote(value)}`);
  if (variables.length > 0) lines.push("");
  lines.push("authorization {", "  users = [");
  for (const root of typeof roots === "string" ? [roots] : roots) lines.push(...renderUsers(root, options));
  if (options.devUser) lines.push(`    { user: dev, password: $${passwordVariable("dev")} }`);
  lines.push("  ]", "}");
  if (options.devUser) lines.push("no_auth_user: dev");
  return lines.join("\n") + "\n";
}

/** The development passwords of the repository's `nats.conf`: public, for development only. */
export const DEV_PASSWORDS: Record<string, string> = Object.fromEntries(
  [...NATS_ROLES, "dev" as const].map((role) => [passwordVariable(role), `dev-${role}`]),
);

/** Markers around the generated part of `nats.conf`. */
export const GENERATED_BEGIN = "# BEGIN generated by `dirigent nats-conf --dev` (runtime/nats/permissions.ts): do not edit";
export const GENERATED_END = "# END generated";

/** The generated part of the development `nats.conf`, markers included. */
export function renderDevAuthorization(root = createSubjects().root): string {
  return `${GENERATED_BEGIN}\n${renderAuthorization(root, { variables: DEV_PASSWORDS, devUser: true })}${GENERATED_END}\n`;
}
