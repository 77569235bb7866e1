/**
 * The stack the permission tests (test/e2e/permissions-*.test.ts) run against: a real nats-server started with the
 * production form of the authorization block (passwords from variables, no `dev` user, no anonymous clients), the mock
 * model, and every runtime role in its own connection as its own user, with inspection on. The server's violations
 * are read from its stderr.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, type Subjects } from "../../protocol/index.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { connectNats, type NatsConnection } from "../../runtime/nats/bus.js";
import { NATS_ROLES, natsUser, passwordVariable, renderAuthorization, type NatsRole } from "../../runtime/nats/permissions.js";
import { toolServicePasswordVariable, toolServiceUser } from "../../runtime/nats/tool-service-users.js";
import { startSystem, type SystemHandle } from "../../runtime/system.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "./nats-server.js";

/** The runtime roles, in the order of `transports` and `systems`. */
export const RUNTIME = ["memory", "handler", "evaluator", "director", "supervisor"] as const;

export interface PermissionsStack {
  root: string;
  subjects: Subjects;
  passwords: Record<NatsRole, string>;
  /** Set before the tests run. */
  server: TestNatsServer;
  /** Set before the tests run. */
  mock: MockLlmServer;
  /** Every transport opened, closed after the tests; the first five are the runtime roles'. */
  transports: OpenTransport[];
  /** The runtime roles' systems, one per role. */
  systems: SystemHandle[];
  /** The credentials of a role's user. */
  as: (role: NatsRole) => { user: string; pass: string };
  /** The permission violations the server has logged so far. */
  violations: () => string[];
  /** A plain connection as a role's user, closed after the tests. */
  connectAs: (role: NatsRole) => Promise<NatsConnection>;
  /** The credentials of a tool service's user (one of {@link PermissionsStackOptions.toolServices}). */
  asToolService: (service: string) => { user: string; pass: string };
}

/** Options of {@link usePermissionsStack}. */
export interface PermissionsStackOptions {
  /** Tool services whose users the configuration has (`dirigent nats-conf --tool-service`). */
  toolServices?: readonly string[];
  /** Settings of every role's system over the stack's own (`natsTools` for the Handler's tools of NATS services). */
  config?: Partial<Config>;
  /** Runs once the server is up, before the roles start (tool services the Handler finds at its start). */
  beforeRoles?: (stack: PermissionsStack) => Promise<void>;
}

/** Starts the stack before the file's tests and stops it after them. */
export function usePermissionsStack(options: PermissionsStackOptions = {}): PermissionsStack {
  const root = randomRoot();
  const subjects = createSubjects(root);
  const passwords = Object.fromEntries(NATS_ROLES.map((role) => [role, randomBytes(12).toString("hex")])) as Record<NatsRole, string>;
  let server: TestNatsServer;
  let mock: MockLlmServer;
  const transports: OpenTransport[] = [];
  const systems: SystemHandle[] = [];
  const connections: NatsConnection[] = [];

  const as = (role: NatsRole) => ({ user: natsUser(root, role), pass: passwords[role] });
  const toolServices = options.toolServices ?? [];
  const servicePasswords = new Map(toolServices.map((service) => [service, randomBytes(12).toString("hex")]));
  const asToolService = (service: string) => ({ user: toolServiceUser(root, service), pass: servicePasswords.get(service) ?? "" });
  const violations = () =>
    server
      .stderr()
      .split("\n")
      .filter((line) => /violation/i.test(line));

  const stack: PermissionsStack = {
    root,
    subjects,
    passwords,
    get server() {
      return server;
    },
    get mock() {
      return mock;
    },
    transports,
    systems,
    as,
    violations,
    connectAs,
    asToolService,
  };

  beforeAll(async () => {
    // The production form: passwords from variables (here set in the file), no `dev` user, no anonymous clients.
    const variables = Object.fromEntries([
      ...NATS_ROLES.map((role) => [passwordVariable(role, root), passwords[role]]),
      ...toolServices.map((service) => [toolServicePasswordVariable(root, service), servicePasswords.get(service)]),
    ]);
    server = await startTestNatsServer({
      config: `max_payload: 2MB\njetstream { store_dir: ".dirigent/jetstream" }\n${renderAuthorization(root, { variables, toolServices })}`,
      // PERM_TRACE=/tmp/trace.log: a protocol trace of every user's subjects, to revise the permission sets (the
      // log then goes to the file, so the tests that read violations from stderr fail).
      ...(process.env["PERM_TRACE"] ? { args: ["-DV", "-l", process.env["PERM_TRACE"]] } : {}),
    });
    mock = await startMockLlm({
      port: 0,
      script: {
        rules: [
          { match: { lastUser: "slowly" }, reply: "slow answer", delayMs: 3000 },
          {
            match: { lastUser: { regex: "Decompose this goal[\\s\\S]*PERMITTED-GOAL" } },
            reply: JSON.stringify({ subGoals: [{ description: "PERMITTED-STEP" }] }),
          },
          {
            match: { lastUser: { regex: "Does this outcome diverge" } },
            reply: JSON.stringify({ divergent: false, severity: "none", reason: "fine" }),
          },
        ],
        default: { reply: "permitted answer" },
      },
    });
    const config: Config = {
      ...loadConfig({}, {}),
      supervisorTickMs: 200,
      supervisorStaggerMs: 0,
      prefix: root,
      openaiBaseUrl: mock.url,
      openaiApiKey: "test-key",
      modelMaxRetries: 0,
      model: "mock-model",
      inspect: true,
      ...options.config,
    };
    await options.beforeRoles?.(stack);
    // Each role in its own connection, as its own user, opening only its own stores.
    for (const role of RUNTIME) {
      const transport = await openNatsTransport(server.url, subjects, {
        name: `perm-${role}`,
        log: silentLogger,
        auth: as(role),
        roles: [role],
      });
      transports.push(transport);
      systems.push(await startSystem({ config, transport, roles: [role] }));
    }
  });

  afterAll(async () => {
    for (const system of systems.reverse()) await system.stop();
    for (const transport of transports) await transport.close();
    for (const nc of connections) await nc.close();
    await mock?.close();
    await server?.stop();
  });

  async function connectAs(role: NatsRole): Promise<NatsConnection> {
    const nc = await connectNats({ servers: server.url, name: `perm-test-${role}`, ...as(role) });
    connections.push(nc);
    return nc;
  }

  return stack;
}
