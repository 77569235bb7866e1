/** `dirigent goal add | list | status | resume | cancel | watch` and `dirigent alerts`: autonomous goals from the command line. */
import { randomUUID } from "node:crypto";
import type { Command } from "commander";
import { GoalId, type Goal, type GoalEvent, type OperatorAlert } from "../../protocol/index.js";
import { RemoteError } from "../client.js";
import { commonOptions, setup, UsageError, untilSignal, type CommonFlags } from "./common.js";
import { placeClient } from "../nats/connect.js";
import { GoalClient } from "../goal-client.js";

interface AddFlags extends CommonFlags {
  priority?: string;
  maxReplans?: string;
  goalId?: string;
  watch?: boolean;
}

function goalId(value: string): string {
  if (!GoalId.safeParse(value).success) throw new UsageError(`goal id '${value}': must be 1–40 characters of [A-Za-z0-9_-]`);
  return value;
}

function intFlag(name: string, value: string | undefined, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max) throw new UsageError(`${name} '${value}': expected an integer from 0 to ${max}`);
  return n;
}

function rethrow(err: unknown): never {
  if (err instanceof RemoteError && err.code === "NO_RESPONDERS")
    throw new Error(`${err.message} (start a Supervisor: 'dirigent up' or 'dirigent worker --role supervisor')`);
  if (err instanceof RemoteError && (err.code === "INVALID_MESSAGE" || err.code === "NOT_FOUND"))
    throw new UsageError(`${err.code}: ${err.message}`);
  throw err;
}

/** Connects to a running runtime (goals need Supervisors, which an embedded runtime would stop with this command). */
async function withGoals(flags: CommonFlags, fn: (client: GoalClient) => Promise<void>): Promise<void> {
  const { config, subjects, log } = setup(flags, "dirigent-goal");
  const placement = await placeClient(config, subjects, log, "dirigent-goal");
  try {
    if (placement.transport.kind === "memory")
      throw new Error("no NATS server reachable: start the runtime with 'dirigent up' or pass --nats URL");
    await fn(new GoalClient(placement.transport.bus, subjects));
  } finally {
    await placement.close();
  }
}

/** One line per goal event, and per alert. */
export function formatGoalEvent(e: GoalEvent): string {
  return `[goal ${e.goalId}] ${e.type.padEnd(18)} ${e.message}`;
}

export function formatAlert(a: OperatorAlert): string {
  return `ALERT ${a.kind} goal ${a.goalId} (replans ${a.replanCount}): ${a.reason}${a.action ? ` — ${a.action}` : ""}`;
}

function formatGoal(goal: Goal): string {
  const lines = [
    `goal ${goal.id}: ${goal.status}${goal.pauseReason ? ` (${goal.pauseReason})` : ""}`,
    `  ${goal.description}`,
    `  replans ${goal.replanCount}/${goal.maxReplans}, plans ${goal.rounds}`,
  ];
  for (const s of goal.subGoals) {
    const deps = s.dependsOn.length > 0 ? ` after ${s.dependsOn.join(",")}` : "";
    lines.push(
      `  ${s.id.padEnd(4)} ${s.status.padEnd(11)} ${s.description}${deps}${s.skipReason ? ` [${s.skipReason}]` : ""}${s.outcome?.error ? ` [${s.outcome.error}]` : ""}`,
    );
  }
  for (const e of goal.evaluations) lines.push(`  eval ${e.subGoalId}: ${e.severity} (${e.source})${e.reason ? ` ${e.reason}` : ""}`);
  return lines.join("\n");
}

/** Prints a goal's events (and alerts about it) as they come; `wait` resolves with its status once it ends. */
async function follow(client: GoalClient, id: string, json: boolean): Promise<{ wait(): Promise<string> }> {
  let end!: (status: string) => void;
  const ended = new Promise<string>((resolve) => (end = resolve));
  const subs = [
    client.events(id, (e) => {
      process.stdout.write((json ? JSON.stringify(e) : formatGoalEvent(e)) + "\n");
      if (e.type === "goal.completed" || e.type === "goal.paused" || e.type === "goal.cancelled") end(e.status);
    }),
    client.alerts((a) => a.goalId === id && process.stdout.write((json ? JSON.stringify(a) : formatAlert(a)) + "\n")),
  ];
  await client.flush();
  return {
    async wait() {
      try {
        // It may have ended before we listened.
        const { goal } = await client.get(id).catch(rethrow);
        if (goal.status !== "active") end(goal.status);
        return await ended;
      } finally {
        await Promise.all(subs.map((s) => s.unsubscribe()));
      }
    },
  };
}

/** Registers `dirigent goal …` and `dirigent alerts`. */
export function registerGoalCommands(program: Command): void {
  const goal = program
    .command("goal")
    .description("autonomous goals: decomposed into sub-goals, checked for divergence, replanned (needs a Supervisor)");

  commonOptions(
    goal
      .command("add")
      .description("submit a goal; print its id (with --watch: its events until it completes or pauses)")
      .argument("<description>", "the goal in words")
      .option("--priority <n>", "0 runs first (default 50)")
      .option("--max-replans <n>", "replans before the goal is paused and an operator alerted (default DIRIGENT_GOAL_MAX_REPLANS)")
      .option("--goal-id <id>", "choose the goal id (idempotent submission)")
      .option("--watch", "print the goal's events until it completes, pauses or is cancelled"),
  ).action(async (description: string, flags: AddFlags) => {
    if (description.trim() === "") throw new UsageError("the goal's description is empty");
    const priority = intFlag("--priority", flags.priority, 1000);
    const maxReplans = intFlag("--max-replans", flags.maxReplans, 100);
    const id = flags.goalId === undefined ? randomUUID() : goalId(flags.goalId);
    await withGoals(flags, async (client) => {
      // Listen first, so that no event of the goal is missed.
      const watching = flags.watch ? await follow(client, id, false) : undefined;
      const reply = await client
        .submit({
          description,
          goalId: id,
          ...(priority !== undefined ? { priority } : {}),
          ...(maxReplans !== undefined ? { maxReplans } : {}),
        })
        .catch(rethrow);
      process.stdout.write(`${reply.goalId}${reply.status === "duplicate" ? " (duplicate: already submitted)" : ""}\n`);
      if (watching) {
        const status = await watching.wait();
        process.exitCode = status === "completed" ? 0 : 1;
      }
    });
  });

  commonOptions(goal.command("list").description("list the goals").option("--json", "print JSON")).action(
    async (flags: CommonFlags & { json?: boolean }) => {
      await withGoals(flags, async (client) => {
        const { goals } = await client.list().catch(rethrow);
        if (flags.json) return void process.stdout.write(JSON.stringify(goals, null, 2) + "\n");
        if (goals.length === 0) return void process.stdout.write("no goals\n");
        for (const g of goals) {
          const counts = Object.entries(g.counts)
            .map(([k, v]) => `${v} ${k}`)
            .join(", ");
          process.stdout.write(
            `${g.id}  ${g.status.padEnd(9)} p${g.priority}  ${g.description.slice(0, 60)}${counts ? `  (${counts})` : ""}\n`,
          );
        }
      });
    },
  );

  commonOptions(
    goal
      .command("status")
      .description("print a goal with its sub-goals and evaluations")
      .argument("<id>", "goal id")
      .option("--json", "print JSON"),
  ).action(async (id: string, flags: CommonFlags & { json?: boolean }) => {
    await withGoals(flags, async (client) => {
      const { goal: g } = await client.get(goalId(id)).catch(rethrow);
      process.stdout.write((flags.json ? JSON.stringify(g, null, 2) : formatGoal(g)) + "\n");
    });
  });

  commonOptions(
    goal.command("resume").description("resume a paused goal (its replan count starts again)").argument("<id>", "goal id"),
  ).action(async (id: string, flags: CommonFlags) => {
    await withGoals(flags, async (client) => {
      const reply = await client.resume(goalId(id)).catch(rethrow);
      process.stdout.write(JSON.stringify(reply) + "\n");
      process.exitCode = reply.status === "resumed" ? 0 : 1;
    });
  });

  commonOptions(goal.command("cancel").description("cancel a goal and every task of its tree").argument("<id>", "goal id")).action(
    async (id: string, flags: CommonFlags) => {
      await withGoals(flags, async (client) => {
        const reply = await client.cancel(goalId(id)).catch(rethrow);
        process.stdout.write(JSON.stringify(reply) + "\n");
        process.exitCode = reply.status === "cancelled" ? 0 : 1;
      });
    },
  );

  commonOptions(
    goal
      .command("watch")
      .description("print a goal's events until it completes, pauses or is cancelled")
      .argument("<id>", "goal id")
      .option("--json", "print JSON lines"),
  ).action(async (id: string, flags: CommonFlags & { json?: boolean }) => {
    await withGoals(flags, async (client) => {
      const status = await (await follow(client, goalId(id), flags.json === true)).wait();
      process.exitCode = status === "completed" ? 0 : 1;
    });
  });

  commonOptions(
    program
      .command("alerts")
      .description("print operator alerts as they are published (escalated goals, major replans)")
      .option("--json", "print JSON lines"),
  ).action(async (flags: CommonFlags & { json?: boolean }) => {
    await withGoals(flags, async (client) => {
      client.alerts((a) => process.stdout.write((flags.json ? JSON.stringify(a) : formatAlert(a)) + "\n"));
      await client.flush();
      const signalled = untilSignal();
      process.stderr.write("dirigent: listening for operator alerts (Ctrl-C to stop)\n");
      await signalled;
    });
  });
}
