/** `dirigent up` (all roles in one process) and `dirigent worker --role R` (one role per process). */
import { Option, type Command } from "commander";
import { commonOptions, setup, untilSignal, UsageError, type CommonFlags } from "./cli-common.js";
import { place } from "./connect.js";
import { natsAuth } from "./nats-auth.js";
import { embeddedModel } from "./embedded-model.js";
import { ROLES, startSystem, type Role } from "./system.js";

interface RuntimeFlags extends CommonFlags {
  role?: string;
}

async function serveUntilSignal(flags: RuntimeFlags, roles: readonly Role[], name: string, startServer: boolean): Promise<void> {
  const { config, subjects, log } = setup(flags, name);
  const placement = await place({ ...(config.nats ? { url: config.nats } : {}), auth: natsAuth(config), roles: roles, subjects, log, name, dataDir: config.dataDir, startServer });
  if (!startServer && placement.transport.kind === "memory") {
    await placement.close();
    throw new Error("a worker needs a NATS server: pass --nats URL or set NATS_URL (start one with 'dirigent up')");
  }
  const needsModel = roles.includes("handler") || (roles.includes("memory") && config.llmMatch);
  const model = needsModel ? await embeddedModel(config) : { config, stop: async () => undefined };
  if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
  const system = await startSystem({ config: model.config, transport: placement.transport, roles, log });
  process.stderr.write(`dirigent: ${roles.join(", ")} on ${placement.note}, subjects under '${subjects.root}', concurrency ${config.concurrency}\n`);
  process.stderr.write(`dirigent: ready (Ctrl-C to stop)\n`);
  const signal = await untilSignal();
  const graceMs = drainGraceMs();
  process.stderr.write(`dirigent: ${signal}: draining (grace ${graceMs} ms)\n`);
  // Roles stop taking work at once; a Director hands its tasks back, the others finish what they hold within the
  // grace period. Whatever is still running then is dropped: its requester stops getting keepalives and asks again.
  const drained = (async () => {
    await system.stop();
    await placement.close();
    return true;
  })();
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([drained, new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  await model.stop();
  if (!inTime) {
    process.stderr.write(`dirigent: grace period over with work in flight; exiting\n`);
    process.exit(0);
  }
  process.stderr.write(`dirigent: drained\n`);
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
      .option("--model <id>", "default model (env DIRIGENT_MODEL)"),
  ).action((flags: RuntimeFlags) => serveUntilSignal(flags, ROLES, "dirigent-up", true));

  commonOptions(
    program
      .command("worker")
      .description("run one role in this process; processes of one role share the work")
      .addOption(new Option("--role <role>", "the role to run").choices(ROLES).makeOptionMandatory())
      .option("--concurrency <n>", "work in flight in this process (env DIRIGENT_CONCURRENCY)")
      .option("--model <id>", "default model, for the handler role (env DIRIGENT_MODEL)"),
  ).action((flags: RuntimeFlags) => {
    const role = ROLES.find((r) => r === flags.role);
    if (!role) throw new UsageError(`--role '${String(flags.role)}': expected one of ${ROLES.join(", ")}`);
    return serveUntilSignal(flags, [role], `dirigent-${role}`, false);
  });
}
