/** `dirigent up` (all roles in one process) and `dirigent worker --role R` (one role per process). */
import { Option, type Command } from "commander";
import { commonOptions, setup, untilSignal, UsageError, type CommonFlags } from "./cli-common.js";
import { place } from "./connect.js";
import { embeddedModel } from "./embedded-model.js";
import { ROLES, startSystem, type Role } from "./system.js";

interface RuntimeFlags extends CommonFlags {
  role?: string;
}

async function serveUntilSignal(flags: RuntimeFlags, roles: readonly Role[], name: string, startServer: boolean): Promise<void> {
  const { config, subjects, log } = setup(flags, name);
  const placement = await place({ ...(config.nats ? { url: config.nats } : {}), subjects, log, name, dataDir: config.dataDir, startServer });
  if (!startServer && placement.transport.kind === "memory") {
    await placement.close();
    throw new Error("a worker needs a NATS server: pass --nats URL or set NATS_URL (start one with 'dirigent up')");
  }
  const model = roles.includes("handler") ? await embeddedModel(config) : { config, stop: async () => undefined };
  if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
  const system = await startSystem({ config: model.config, transport: placement.transport, roles, log });
  process.stderr.write(`dirigent: ${roles.join(", ")} on ${placement.note}, subjects under '${subjects.root}', concurrency ${config.concurrency}\n`);
  process.stderr.write(`dirigent: ready (Ctrl-C to stop)\n`);
  const signal = await untilSignal();
  process.stderr.write(`dirigent: ${signal}: draining\n`);
  await system.stop();
  await placement.close();
  await model.stop();
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
