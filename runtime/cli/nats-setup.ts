/**
 * `dirigent nats-setup`: the admin step of a subject root. It creates what the root's roles use and may not create
 * themselves (runtime/nats/permissions.ts): the tasks, turns, goals and index buckets, the intake stream with the
 * Directors' consumer (its ack wait from `DIRIGENT_ACK_WAIT_MS`), and the events stream. Run it as the root's admin
 * user (`admin`, `<root>-admin`) before the workers start, and again after changing the ack wait or the replicas.
 */
import type { Command } from "commander";
import { jetstreamManager } from "@nats-io/jetstream";
import { millis } from "@nats-io/transport-node";
import type { Subjects } from "../../protocol/index.js";
import { commonOptions, setup, type CommonFlags } from "./common.js";
import { natsAuth } from "../nats/auth.js";
import { NatsBus, type NatsConnection } from "../nats/bus.js";
import { place } from "../nats/connect.js";

/** The streams of root `subjects` that `dirigent nats-setup` makes: KV buckets as their streams (`KV_<bucket>`). */
export function setupStreams(subjects: Subjects): string[] {
  return [
    `KV_${subjects.tasksBucket}`,
    `KV_${subjects.turnsBucket}`,
    `KV_${subjects.goalsBucket}`,
    `KV_${subjects.indexBucket}`,
    subjects.intakeStream,
    subjects.eventsStream,
  ];
}

/** One line per stream (its messages and replicas) and one for the intake consumer. */
async function describe(nc: NatsConnection, subjects: Subjects): Promise<string> {
  const jsm = await jetstreamManager(nc);
  const lines: string[] = [];
  for (const name of setupStreams(subjects)) {
    const info = await jsm.streams.info(name);
    lines.push(`  ${name}: ${info.state.messages} messages, ${info.config.num_replicas || 1} replica(s)`);
  }
  const consumer = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
  lines.push(
    `  ${subjects.intakeStream} consumer ${subjects.directorConsumer}: ack wait ${millis(consumer.config.ack_wait ?? 0)} ms, ` +
      `max ack pending ${consumer.config.max_ack_pending ?? "-"}`,
  );
  return lines.join("\n");
}

/** Registers `dirigent nats-setup`. */
export function registerNatsSetupCommand(program: Command): void {
  commonOptions(
    program
      .command("nats-setup")
      .description(
        "create the streams, KV buckets and intake consumer of a subject root, as its admin user (NATS_USER=<root>-admin); " +
          "existing ones are kept (docs/deploy.md)",
      ),
  ).action(async (flags: CommonFlags) => {
    const { config, subjects, log } = setup(flags, "dirigent-nats-setup");
    // Every role's stores opened at once: what is missing is created, what exists is only checked (and scaled with
    // --scale-streams); the intake consumer gets this process's DIRIGENT_ACK_WAIT_MS.
    const placement = await place({
      ...(config.nats ? { url: config.nats } : {}),
      auth: natsAuth(config),
      replicas: config.replicas,
      scaleStreams: config.scaleStreams,
      subjects,
      log,
      name: "dirigent-nats-setup",
      dataDir: config.dataDir,
      startServer: false,
    });
    try {
      const bus = placement.transport.bus;
      if (!(bus instanceof NatsBus)) throw new Error("no NATS server reachable: pass --nats URL or set NATS_URL");
      process.stdout.write(`root '${subjects.root}' is set up on ${placement.note}:\n${await describe(bus.connection, subjects)}\n`);
    } finally {
      await placement.close();
    }
  });
}
