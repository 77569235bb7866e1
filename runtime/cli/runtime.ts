/** `dirigent up` (all roles in one process) and `dirigent worker --role R` (one role per process). */
import { Option, type Command } from "commander";
import { commonOptions, setup, untilSignal, UsageError, type CommonFlags } from "./common.js";
import { place } from "../nats/connect.js";
import { natsAuth } from "../nats/auth.js";
import { embeddedModel } from "../model/embedded.js";
import { checkSelf, superviseConnection } from "../health.js";
import { NatsBus } from "../nats/bus.js";
import { ROLES, startSystem, type Role, type SystemHandle } from "../system.js";
import type { Config } from "../config.js";
import { startTracing } from "../tracing/sdk.js";
import { messageOf } from "../../protocol/errors.js";
import { secretValues } from "../secrets.js";
import { providerKeys } from "../model/providers.js";

/** How long a self-check waits for this process's own answer. */
const SELF_CHECK_TIMEOUT_MS = 5000;
/** After a drain, how long anything still holding the event loop (a stray handle) may keep the process alive. */
const EXIT_AFTER_DRAIN_MS = 2000;
const METRICS_PORT_HELP =
  "serve Prometheus metrics on this port (env DIRIGENT_METRICS_PORT; host DIRIGENT_METRICS_HOST, default 127.0.0.1)";

interface RuntimeFlags extends CommonFlags {
  role?: string;
}

async function serveUntilSignal(flags: RuntimeFlags, roles: readonly Role[], name: string, startServer: boolean): Promise<void> {
  const { config, subjects, log } = setup(flags, name);
  // Registered before any role starts, so that every span is exported (docs/traces.md).
  const tracing = await startTracing(name, process.env, [...secretValues(config), ...providerKeys(config)]);
  // Spans still buffered go out before the process exits; a collector that does not answer holds it up 2 s at most.
  const flushTraces = () => Promise.race([tracing?.shutdown().catch(() => undefined), new Promise((r) => setTimeout(r, 2000).unref())]);
  const placement = await place({
    ...(config.nats ? { url: config.nats } : {}),
    auth: natsAuth(config),
    replicas: config.replicas,
    scaleStreams: config.scaleStreams,
    roles: roles,
    subjects,
    log,
    name,
    dataDir: config.dataDir,
    startServer,
    maxReconnects: config.natsMaxReconnects,
    records: { maxAgeMs: config.recordsMaxAgeMs, maxBytes: config.recordsMaxBytes },
  });
  if (!startServer && placement.transport.kind === "memory") {
    await placement.close();
    throw new Error("a worker needs a NATS server: pass --nats URL or set NATS_URL (start one with 'dirigent up')");
  }
  const needsModel = roles.includes("handler") || (roles.includes("memory") && config.llmMatch);
  const model = needsModel ? await embeddedModel(config) : { config, stop: async () => undefined };
  if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
  let system: Awaited<ReturnType<typeof startSystem>>;
  try {
    system = await startSystem({ config: model.config, transport: placement.transport, roles, log });
  } catch (err) {
    // A process that cannot serve must not stay alive holding its NATS connection: its supervisor restarts a process
    // that exits non-zero (Restart=on-failure), never one that waits. Whatever a role that did start still holds (a
    // metrics port, an MCP server) ends with the process.
    log.error({ err: messageOf(err) }, "start failed: exiting");
    process.stderr.write(`dirigent: cannot start: ${messageOf(err)}; exiting with code 1\n`);
    await Promise.race([
      Promise.allSettled([placement.close(), model.stop()]),
      new Promise((resolve) => setTimeout(resolve, EXIT_AFTER_DRAIN_MS).unref()),
    ]);
    await flushTraces();
    process.exit(1);
  }
  for (const line of startLines(model.config, system)) process.stderr.write(`dirigent: ${line}\n`);
  process.stderr.write(
    `dirigent: ${roles.join(", ")} on ${placement.note}, subjects under '${subjects.root}', concurrency ${config.concurrency}\n`,
  );
  // A connection closed for good (the server refused the credentials, or stayed away past the reconnect budget), or
  // subscriptions that stay lost, leave a process that cannot serve: it exits non-zero for its supervisor to restart it.
  const bus = placement.transport.bus;
  let lost: (reason: string) => void = () => undefined;
  const cutOff = new Promise<string>((resolve) => (lost = resolve));
  const watch =
    bus instanceof NatsBus
      ? superviseConnection({
          connection: bus,
          selfCheck: () => checkSelf(bus, subjects, system.processId, SELF_CHECK_TIMEOUT_MS),
          checkIntervalMs: config.selfCheckMs,
          log,
          onFatal: lost,
        })
      : undefined;
  // Listening before "ready" is printed: a supervisor that signals as soon as it reads the line finds the handler in
  // place (under load the line woke a test that signalled before the next statement ran, and the process died of it).
  const signalled = untilSignal();
  process.stderr.write(`dirigent: ready (Ctrl-C to stop)\n`);
  const outcome = await Promise.race([signalled.then((signal) => ({ signal })), cutOff.then((reason) => ({ reason }))]);
  watch?.stop();
  if ("reason" in outcome) {
    log.error({ reason: outcome.reason, processId: system.processId }, "cannot serve any more: exiting");
    process.stderr.write(`dirigent: fatal: ${outcome.reason}; exiting with code 1 so that a supervisor restarts this process\n`);
    // Nothing can be handed back over a dead connection: intake items this process held are redelivered after the
    // ack wait, requests it held are asked again by their requesters.
    await Promise.race([model.stop(), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    await flushTraces();
    process.exit(1);
  }
  const { signal } = outcome;
  const graceMs = drainGraceMs();
  process.stderr.write(`dirigent: ${signal}: draining (grace ${graceMs} ms)\n`);
  // Roles stop taking work at once; a Director hands its tasks back, the others finish what they hold within the
  // grace period. Whatever is still running then is dropped: its requester stops getting keepalives and asks again.
  // The grace period bounds everything, a drain over a connection that is down (it waits for the server) included.
  const drained = (async () => {
    await system.stop();
    await placement.close();
    await model.stop();
    await flushTraces();
    return true;
  })();
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([drained, new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  if (!inTime) {
    process.stderr.write(`dirigent: grace period over with work in flight (or the NATS server unreachable); exiting\n`);
    process.exit(0);
  }
  process.stderr.write(`dirigent: drained\n`);
  // Whatever still holds the event loop must not keep a stopped process alive.
  setTimeout(() => process.exit(0), EXIT_AFTER_DRAIN_MS).unref();
}

/** `DIRIGENT_DRAIN_GRACE_MS`: how long a SIGTERM'd process may take to finish its work in flight (default 30 s). */
function drainGraceMs(): number {
  const raw = process.env.DIRIGENT_DRAIN_GRACE_MS;
  const value = raw === undefined || raw === "" ? Number.NaN : Number(raw);
  return Number.isInteger(value) && value >= 0 ? value : 30_000;
}

/** Registers the runtime commands. */
export function registerRuntimeCommands(program: Command): void {
  commonOptions(
    program
      .command("up")
      .description("run all four roles in this process (starts a nats-server child when none answers on 127.0.0.1:4222)")
      .option("--concurrency <n>", "tasks in flight per role (env DIRIGENT_CONCURRENCY)")
      .option("--model <id>", "default model (env DIRIGENT_MODEL)")
      .option("--metrics-port <port>", METRICS_PORT_HELP),
  ).action((flags: RuntimeFlags) => serveUntilSignal(flags, ROLES, "dirigent-up", true));

  commonOptions(
    program
      .command("worker")
      .description("run one role in this process; processes of one role share the work")
      .addOption(new Option("--role <role>", "the role to run").choices(ROLES).makeOptionMandatory())
      .option("--concurrency <n>", "work in flight in this process (env DIRIGENT_CONCURRENCY)")
      .option("--model <id>", "default model, for the handler role (env DIRIGENT_MODEL)")
      .option("--metrics-port <port>", METRICS_PORT_HELP),
  ).action((flags: RuntimeFlags) => {
    const role = ROLES.find((r) => r === flags.role);
    if (!role) throw new UsageError(`--role '${String(flags.role)}': expected one of ${ROLES.join(", ")}`);
    return serveUntilSignal(flags, [role], `dirigent-${role}`, false);
  });
}

/**
 * What a new runtime process says about itself besides its roles: the model server and model, the tools by source
 * (and whether NATS services' tools are on), inspection and metrics, each with the setting that changes it.
 */
export function startLines(config: Config, system: Pick<SystemHandle, "roles" | "handlerTools" | "metricsUrl">): string[] {
  const lines: string[] = [];
  if (system.roles.includes("handler")) {
    const providers = Object.keys(config.providers);
    const server = config.openaiBaseUrl
      ? withoutUserInfo(config.openaiBaseUrl)
      : "https://api.openai.com/v1 (the SDK's default; OPENAI_BASE_URL to change)";
    lines.push(`model ${config.model} at ${server}${providers.length ? `; providers ${providers.join(", ")}` : ""}`);
    const bySource = new Map<string, string[]>();
    for (const t of system.handlerTools ?? []) bySource.set(t.source, [...(bySource.get(t.source) ?? []), t.name]);
    const listed = [...bySource].map(([source, names]) => `${source}: ${names.join(", ")}`).join("; ");
    const nats = config.natsTools === "on" ? "NATS services' tools on" : "NATS services' tools off (DIRIGENT_NATS_TOOLS=on)";
    lines.push(`tools ${listed === "" ? "none" : listed}; ${nats}`);
  }
  lines.push(
    config.inspect ? "inspection on: see it with 'dirigent inspect'" : "inspection off (DIRIGENT_INSPECT=on for 'dirigent inspect')",
  );
  lines.push(system.metricsUrl !== undefined ? `metrics on ${system.metricsUrl}` : "metrics off (--metrics-port)");
  return lines;
}

/** A URL without the user and password it may carry (a start line is no place for them). */
function withoutUserInfo(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    return parsed.toString();
  } catch {
    return "(not a URL)";
  }
}
