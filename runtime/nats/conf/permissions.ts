/**
 * The one place the NATS accounts, users and per-role permissions of a deployment are defined. `renderAccounts`
 * writes the nats-server `accounts { ... }` block for one or more subject roots (`dirigent nats-conf`); the
 * repository's `nats.conf` holds its output for the default root, and a test fails when it is stale.
 *
 * Every root is an account of its own (`ACME` for root `acme`, see {@link accountName}): its streams, buckets and
 * subjects are invisible to the users of every other root, whatever those create. Within a root, each role may
 * publish and subscribe only where it must, JetStream API subjects included; no role creates a stream or a consumer
 * (an admin step does, `dirigent nats-setup`, run as the root's `admin` user), because nats-server 2.9 checks neither a
 * new stream's `subjects`/`sources` nor a push consumer's `deliver_subject` against its creator's permissions.
 * Every user has a name of its own (`submitter` for the default root, `<root>-submitter` for any other, see
 * {@link natsUser}) and an inbox prefix of its own (`_INBOX_<user>`, see {@link userInboxPrefix}), so that no other
 * user of its root can read its replies (JetStream API answers carry task records). A role may publish into the
 * inboxes of those who send it requests: not through `allow_responses`, which allows one reply per request by
 * default, while a responder also sends keepalives (`KEEPALIVE_HEADER`). There is no top-level
 * `authorization { users }`: nats-server 2.9 must not have one beside `accounts {}` (CVE-2023-47090).
 */
import {
  createSubjects,
  DEFAULT_INBOX_PREFIX,
  DEFAULT_ROOT,
  inboxesOf,
  jetStreamApi as js,
  ownInboxPrefix,
} from "../../../protocol/index.js";
import { CURRENT_KEY } from "../index-store.js";
import { list, quote, type RolePermissions } from "./conf-syntax.js";
import { renderToolServiceUsers } from "./tool-service-users.js";

/** The NATS users of a deployment: the runtime roles, clients that submit work, and inspectors (which may only read, and fork an ended task). */
export const NATS_ROLES = ["submitter", "director", "evaluator", "handler", "memory", "supervisor", "inspector"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

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
  return /^[A-Za-z0-9_\-.:]+$/.test(user) ? ownInboxPrefix(user) : undefined;
}

/**
 * The inbox prefix of a connection: that of its user ({@link userInboxPrefix}) when it logs in with a user name;
 * without one, `_INBOX_<role>` for a process running exactly one runtime role, else `_INBOX`.
 */
export function inboxPrefixFor(roles: readonly string[] | undefined, user?: string): string {
  const own = user === undefined ? undefined : userInboxPrefix(user);
  if (own !== undefined) return own;
  const only = roles?.length === 1 ? roles[0] : undefined;
  return only !== undefined && RUNTIME_ROLES.includes(only) ? ownInboxPrefix(only) : DEFAULT_INBOX_PREFIX;
}

/**
 * The server-side variable (or environment variable) holding a user's password: `DIRIGENT_NATS_HANDLER_PASSWORD` for
 * the default root, `DIRIGENT_NATS_ACME_HANDLER_PASSWORD` for root `acme` (dots and dashes become `_`).
 */
export function passwordVariable(role: NatsRole | "dev" | "admin", root: string = DEFAULT_ROOT): string {
  const user = role === "dev" ? role : natsUser(root, role);
  return `DIRIGENT_NATS_${user.toUpperCase().replace(/[.-]/g, "_")}_PASSWORD`;
}

/**
 * Look a stream up (`ensureStream`, `Kvm.create` of an existing bucket). Creating one is the admin's
 * (`dirigent nats-setup`): a role that could create streams could also capture or source any subject of its account.
 */
const streamLookup = (stream: string) => [js.streamInfo(stream)];
/**
 * Open, read and write a KV bucket. Reads use direct get by subject (`DIRECT.GET.<stream>.<subject>`, 2.9) on buckets
 * created with `allow_direct`, as the runtime creates them; `STREAM.MSG.GET` on a bucket made without it. Listing the
 * keys is a `STREAM.INFO` with a subjects filter (runtime/nats/store.ts), not a consumer.
 */
const kvReadWrite = (bucket: string) => [
  ...streamLookup(js.bucketStream(bucket)),
  js.bucketKey(bucket, ">"),
  js.directGet(js.bucketStream(bucket), ">"),
  js.streamMsgGet(js.bucketStream(bucket)),
];
/** A bucket of a `NatsTaskStore`: read and write, and purge the chunks of a large value once replaced (runtime/nats/chunks.ts). */
const kvStore = (bucket: string) => [...kvReadWrite(bucket), js.streamPurge(js.bucketStream(bucket))];

/** Read the events stream without side effects: its state and its messages by sequence or by subject (`STREAM.MSG.GET`). */
const streamRead = (stream: string) => [js.streamInfo(stream), js.streamMsgGet(stream)];

/** The subjects of the inboxes of a role's user of root `root` (`_INBOX_<user>.>`). */
const inboxOf = (root: string, role: NatsRole | "admin") => inboxesOf(ownInboxPrefix(natsUser(root, role)));

/**
 * What every runtime role may do besides its own subjects: publish its actors' inspection messages
 * (`<root>.inspect.<role>.<kind>`, when `DIRIGENT_INSPECT` is on), under its own role name only; answer pings
 * (`<root>.ping`: every process answers, into the inbox of the submitter or of the runtime role that asks) and ping;
 * read and write the bodies bucket (a request or answer larger than one message, runtime/nats/chunks.ts).
 */
const runtimeCommon = (root: string, role: string): RolePermissions => {
  const s = createSubjects(root);
  return {
    publish: [
      s.anyInspectOf(role),
      s.ping,
      ...(["submitter", ...RUNTIME_ROLES] as NatsRole[]).map((r) => inboxOf(root, r)),
      ...kvStore(s.bodiesBucket),
    ],
    subscribe: [s.ping],
  };
};

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
  const control = s.anyControl;
  /** The goal API (served by Supervisors) and what it publishes. */
  const goalRequests = [s.goalsSubmit, s.goalsList, s.anyGoalRequest("get"), s.anyGoalRequest("resume"), s.anyGoalRequest("cancel")];
  const goalEvents = s.anyGoalEvents;
  return {
    submitter: {
      publish: [
        s.submit,
        s.anyTaskGet,
        s.anyTaskCancel,
        s.anyTaskInput,
        s.anyTaskNodes,
        s.anyTaskNode,
        s.anyTaskRerun,
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
        js.info,
        ...kvStore(s.tasksBucket),
        ...streamLookup(s.intakeStream),
        ...streamLookup(s.eventsStream),
        // The last message of a subject (`lastPublished`): is a redelivered final task's result stored, or did its old
        // owner die before publishing it? How far did a task running under a pending claim get (its last event)?
        js.streamMsgGet(s.eventsStream),
        // The intake consumer is created (and its ack wait set) by `dirigent nats-setup`; Directors read it.
        js.consumerInfo(s.intakeStream, s.directorConsumer),
        js.consumerNext(s.intakeStream, s.directorConsumer),
        // A queued task's record is its intake item: looked up by subject (status, cancel), removed when cancelled.
        js.directGet(s.intakeStream, ">"),
        js.streamMsgGet(s.intakeStream),
        js.streamMsgDelete(s.intakeStream),
        js.acks(s.intakeStream),
        // The node records (`nodes`, `node`): read from the turns bucket, listed by key (its stream's subjects).
        ...kvReadWrite(s.turnsBucket),
      ],
      subscribe: [
        s.submit,
        s.anyTaskGet,
        s.anyTaskCancel,
        s.anyTaskNodes,
        s.anyTaskNode,
        s.anyTaskRerun,
        s.anyProgress,
        control,
        inbox("director"),
      ],
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
        js.info,
        ...kvStore(s.turnsBucket),
      ],
      subscribe: [s.evaluate, s.anyTaskInput, control, inbox("evaluator")],
    },
    handler: {
      // Tools of NATS services: discovery (`$SRV.INFO`, `$SRV.PING`) and calls of endpoints under `<root>.tools.>`.
      publish: [
        inbox("evaluator"),
        inbox("director"),
        clients,
        s.anyProgress,
        js.info,
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
      // The index is written by `dirigent memory index` (as this user), which purges replaced generations. Its
      // pointer is watched as the plain messages of its subject, with no consumer (runtime/nats/index-store.ts).
      publish: [inbox("evaluator"), js.info, ...kvReadWrite(s.indexBucket), js.streamPurge(js.bucketStream(s.indexBucket))],
      subscribe: [s.memoryMatch, control, inbox("memory"), js.bucketKey(s.indexBucket, CURRENT_KEY)],
    },
    // Runs goals: submits their tasks like a client, keeps goals and leases in the goals bucket, and answers the goal API.
    supervisor: {
      publish: [
        clients,
        s.submit,
        s.anyTaskGet,
        s.anyTaskCancel,
        goalEvents,
        s.operatorAlerts,
        s.goalControl,
        js.info,
        ...kvStore(s.goalsBucket),
      ],
      subscribe: [...goalRequests, s.goalControl, s.anyTaskResult, inbox("supervisor")],
    },
    // It watches the inspection messages and the tasks' events, asks for a task's record, and replays finished tasks
    // from the events stream (runtime/inspect/replay.ts); it creates no consumer. The one thing it changes: a fork of
    // an ended task, asked of a Director (the page's "Re-run from here").
    inspector: {
      publish: [s.anyTaskGet, s.anyTaskNodes, s.anyTaskNode, s.anyTaskRerun, ...streamRead(s.eventsStream)],
      subscribe: [s.anyInspect, s.anyTaskEvents, s.anyTaskResult, inbox("inspector")],
    },
  };
}

/**
 * The NATS account of subject root `root`: the root upper-cased, its dots and dashes as `_` (`ACME_PROD` for root
 * `acme.prod`), as its streams and buckets are named (`ACME_PROD_INTAKE`).
 */
export function accountName(root: string): string {
  return root.toUpperCase().replace(/[.-]/g, "_");
}

/**
 * Why `roots` cannot share one server's configuration, or `undefined` when they can: two roots with the same account
 * name (`acme-x` and `acme_x`, `acme.x`) would share an account, its streams and their password variables.
 */
export function rootsClash(roots: readonly string[]): string | undefined {
  const seen = new Map<string, string>();
  for (const root of roots) {
    const account = accountName(root);
    const other = seen.get(account);
    if (other !== undefined && other !== root)
      return `roots '${other}' and '${root}' are both account ${account} (dots and dashes become '_'), sharing streams and password variables; choose roots that differ otherwise`;
    seen.set(account, root);
  }
  return undefined;
}

/** Options of {@link renderAccounts}. */
export interface RenderOptions {
  /**
   * Values of the password variables, written into the file. Without them each password is read from the server's
   * environment (`$DIRIGENT_NATS_<ROLE>_PASSWORD`, see {@link passwordVariable}), which is how production should run.
   */
  variables?: Partial<Record<string, string>>;
  /**
   * Add a user `dev` that may do anything in the root's account, and let clients without credentials in as `dev`
   * (`no_auth_user`). For the development server only.
   */
  devUser?: boolean;
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
 * The permissions of the admin user of a root (`admin`, `<root>-admin`): the JetStream API of its root's account only,
 * no application subject. It runs `dirigent nats-setup` (creating the streams, buckets and the intake consumer) and
 * operators' `nats stream` commands.
 */
export function adminPermissions(root: string): RolePermissions {
  return { publish: [js.any], subscribe: [inboxOf(root, "admin")] };
}

/**
 * The entries of the `users = [...]` list of `root`'s account: one user per role and the root's admin. With `devUser`,
 * runtime roles may also answer clients without credentials (the `dev` user's `_INBOX`).
 */
export function renderUsers(root: string, options: Pick<RenderOptions, "devUser" | "toolServices"> = {}): string[] {
  const permissions = rolePermissions(root);
  const lines: string[] = [];
  for (const role of NATS_ROLES) {
    const p = permissions[role];
    const answersDev = options.devUser === true && RUNTIME_ROLES.includes(role);
    lines.push(
      ...userEntry(
        natsUser(root, role),
        passwordVariable(role, root),
        answersDev ? withCommon(p, { publish: [inboxesOf(DEFAULT_INBOX_PREFIX)], subscribe: [] }) : p,
      ),
    );
  }
  lines.push(...userEntry(natsUser(root, "admin"), passwordVariable("admin", root), adminPermissions(root)));
  if (options.toolServices) lines.push(...renderToolServiceUsers(root, options.toolServices));
  return lines;
}

/**
 * The account of `root`, an entry of the `accounts { ... }` block: JetStream enabled, and the users of
 * {@link renderUsers} (with `devUser`, also `dev`). `dirigent nats-conf --users` prints it to add to a server
 * configuration that has an `accounts` block already.
 */
export function renderAccount(root: string, options: Pick<RenderOptions, "devUser" | "toolServices"> = {}): string[] {
  const users = renderUsers(root, options);
  if (options.devUser) users.push(`    { user: dev, password: $${passwordVariable("dev")} }`);
  return [`  ${accountName(root)}: {`, "    jetstream: enabled", "    users = [", ...users.map((line) => `  ${line}`), "    ]", "  }"];
}

/**
 * Renders the `accounts` block (and, with `devUser`, `no_auth_user`) of nats-server's configuration: one account per
 * root in `roots` ({@link accountName}), each with its users. Nothing of one account (subjects, streams, buckets,
 * consumers) is visible in another.
 * @example renderAccounts("dirigent") // passwords from $DIRIGENT_NATS_<ROLE>_PASSWORD
 * @example renderAccounts(["acme", "globex"]) // $DIRIGENT_NATS_ACME_<ROLE>_PASSWORD, $DIRIGENT_NATS_GLOBEX_<ROLE>_PASSWORD
 * @throws {RangeError} when two roots would share an account ({@link rootsClash}).
 */
export function renderAccounts(roots: string | readonly string[], options: RenderOptions = {}): string {
  const all = typeof roots === "string" ? [roots] : roots;
  const clash = rootsClash(all);
  if (clash !== undefined) throw new RangeError(clash);
  const lines: string[] = [];
  const variables = Object.entries(options.variables ?? {}).filter((e): e is [string, string] => e[1] !== undefined);
  for (const [name, value] of variables) lines.push(`${name}: ${quote(value)}`);
  if (variables.length > 0) lines.push("");
  lines.push("accounts {");
  for (const root of all) lines.push(...renderAccount(root, options));
  lines.push("}");
  if (options.devUser) lines.push("no_auth_user: dev");
  return lines.join("\n") + "\n";
}

/** The development passwords of the repository's `nats.conf`: public, for development only. */
export const DEV_PASSWORDS: Record<string, string> = Object.fromEntries(
  [...NATS_ROLES, "admin" as const, "dev" as const].map((role) => [passwordVariable(role), `dev-${role}`]),
);

/** Markers around the generated part of `nats.conf`. */
export const GENERATED_BEGIN = "# BEGIN generated by `dirigent nats-conf --dev` (runtime/nats/conf/permissions.ts): do not edit";
export const GENERATED_END = "# END generated";

/** The generated part of the development `nats.conf`, markers included. */
export function renderDevAuthorization(root = createSubjects().root): string {
  return `${GENERATED_BEGIN}\n${renderAccounts(root, { variables: DEV_PASSWORDS, devUser: true })}${GENERATED_END}\n`;
}
