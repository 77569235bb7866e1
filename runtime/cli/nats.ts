/**
 * `dirigent nats-conf`: the nats-server accounts (one per subject root), users and per-role permissions, and cluster
 * node configs. `dirigent nats-setup`: the admin step of a subject root. It creates what the root's roles use and may
 * not create themselves (runtime/nats/conf/permissions.ts): the tasks, turns, goals, index and bodies buckets, the intake
 * stream with the Directors' consumer (its ack wait from `DIRIGENT_ACK_WAIT_MS`), and the events stream.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Option, type Command } from "commander";
import { checkRoot, DEFAULT_ROOT, type Subjects, jetStreamApi } from "../../protocol/index.js";
import { commonOptions, setup, UsageError, type CommonFlags } from "./common.js";
import { renderAccount, renderAccounts, renderDevAuthorization, rootsClash } from "../nats/conf/permissions.js";
import { renderToolServiceUsers } from "../nats/conf/tool-service-users.js";
import {
  DEFAULT_CLUSTER_NAME,
  localClusterNodes,
  remoteClusterNodes,
  renderClusterNode,
  type ClusterNode,
} from "../nats/conf/cluster-conf.js";
import { messageOf } from "../../protocol/errors.js";
import { jetstreamManager } from "@nats-io/jetstream";
import { millis } from "@nats-io/transport-node";
import { natsAuth } from "../nats/auth.js";
import { NatsBus, type NatsConnection } from "../nats/bus.js";
import { place } from "../nats/connect.js";
import { BODIES_MAX_AGE_MS } from "../nats/chunks.js";
import { openKvStore } from "../nats/store.js";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

interface NatsConfFlags {
  prefix?: string[];
  dev?: boolean;
  admin?: boolean;
  users?: boolean;
  toolService?: string[];
  cluster?: string;
  clusterName?: string;
  out?: string;
}

/** The accounts block's file beside the node configs. */
const AUTH_FILE = "dirigent-auth.conf";

/** Registers `dirigent nats-conf`. */
export function registerNatsCommands(program: Command): void {
  program
    .command("nats-conf")
    .description(
      "print the nats-server accounts block (an account per root, a user per role and an admin user in each, " +
        "passwords from $DIRIGENT_NATS_[<ROOT>_]<ROLE>_PASSWORD)",
    )
    .addOption(
      new Option(
        "--prefix <root>",
        "subject root (env DIRIGENT_PREFIX, default 'dirigent'); repeat it for several roots sharing one server",
      ).argParser(collect),
    )
    .option("--admin", "accepted for older scripts: every account has its user `admin` (`<root>-admin`) now")
    .addOption(
      new Option(
        "--tool-service <name>",
        "add a user for NATS tool service <name> (`tool-<name>`, `<root>-tool-<name>`; password from " +
          "$DIRIGENT_NATS_[<ROOT>_]TOOL_<NAME>_PASSWORD): it serves <root>.tools.<name>.> only and answers only the " +
          "requests it received (docs/tools.md); repeat it for each service",
      ).argParser(collect),
    )
    .option("--users", "print only the account entries, to add inside the `accounts` block of a server configuration that has one")
    .option("--dev", "the development block of nats.conf: public dev passwords and a `dev` user for clients without credentials")
    .option(
      "--cluster <nodes>",
      "write a cluster's node configs into --out: a count N (local nodes on 127.0.0.1, client ports 4222…, routes 6222…) " +
        "or host:route-port,… of remote nodes (docs/deploy.md)",
    )
    .option("--cluster-name <name>", `cluster name, and the prefix of local node names (default '${DEFAULT_CLUSTER_NAME}')`)
    .option("--out <dir>", "directory the cluster's files are written to (with --cluster)")
    .action(async (flags: NatsConfFlags) => {
      const roots = flags.prefix ?? [process.env["DIRIGENT_PREFIX"] ?? DEFAULT_ROOT];
      for (const root of roots) {
        try {
          checkRoot(root);
        } catch (err) {
          throw new UsageError(`--prefix '${root}': ${messageOf(err)}`);
        }
      }
      if (new Set(roots).size !== roots.length) throw new UsageError(`--prefix: a root is given twice (${roots.join(", ")})`);
      const clash = rootsClash(roots);
      if (clash !== undefined) throw new UsageError(`--prefix: ${clash}`);
      const nested = roots.find((a) => roots.some((b) => b.startsWith(`${a}.`)));
      if (nested !== undefined)
        throw new UsageError(`--prefix: roots under root '${nested}' share its subjects; choose roots that do not nest`);
      if (flags.dev && (roots.length > 1 || flags.users)) throw new UsageError("--dev is the block of one root's development server");
      if (flags.users && flags.cluster !== undefined)
        throw new UsageError("--users prints account entries; --cluster writes whole node configs");
      const toolServices = toolServicesOf(flags, roots);
      const authorization = flags.dev
        ? renderDevAuthorization(roots[0] ?? DEFAULT_ROOT)
        : flags.users
          ? roots.flatMap((root) => renderAccount(root, { toolServices })).join("\n") + "\n"
          : renderAccounts(roots, { toolServices });
      if (flags.cluster === undefined) {
        process.stdout.write(authorization);
        return;
      }
      await writeCluster(flags, authorization);
    });
}

/** The `--tool-service` names, checked (each once, usable in a subject and a variable) before anything is printed. */
function toolServicesOf(flags: NatsConfFlags, roots: readonly string[]): string[] {
  const services = flags.toolService ?? [];
  if (services.length > 0 && flags.dev) throw new UsageError("--tool-service: the development block's `dev` user serves tools already");
  if (new Set(services).size !== services.length) throw new UsageError(`--tool-service: a service is given twice (${services.join(", ")})`);
  for (const root of roots) {
    try {
      renderToolServiceUsers(root, services);
    } catch (err) {
      throw new UsageError(`--tool-service: ${messageOf(err)}`);
    }
  }
  return services;
}

/** Writes `<out>/<node>.conf` per node and the accounts block they include; prints how to start them. */
async function writeCluster(flags: NatsConfFlags, authorization: string): Promise<void> {
  if (!flags.out) throw new UsageError("--cluster needs --out <dir>: one file is written per node");
  const out = resolve(flags.out);
  const clusterName = flags.clusterName ?? DEFAULT_CLUSTER_NAME;
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(clusterName))
    throw new UsageError(`--cluster-name '${clusterName}': expected [A-Za-z0-9_-] characters`);
  const spec = flags.cluster ?? "";
  let nodes: ClusterNode[];
  if (/^\d+$/.test(spec)) {
    const n = Number(spec);
    if (n < 3 || n > 9) throw new UsageError(`--cluster ${spec}: a cluster has 3 to 9 nodes (3 or 5 for replicas 3 or 5)`);
    nodes = localClusterNodes(n, { dir: out, clusterName });
  } else {
    try {
      nodes = remoteClusterNodes(spec);
    } catch (err) {
      throw new UsageError(`--cluster: ${messageOf(err)}`);
    }
    if (nodes.length < 3) throw new UsageError(`--cluster '${spec}': a cluster has at least 3 nodes`);
  }
  await mkdir(out, { recursive: true });
  await writeFile(join(out, AUTH_FILE), authorization, { mode: 0o600 });
  const lines: string[] = [];
  for (const [i, node] of nodes.entries()) {
    const file = join(out, `${node.name}.conf`);
    await writeFile(file, renderClusterNode({ clusterName, nodes, include: AUTH_FILE }, i), { mode: 0o600 });
    lines.push(`  nats-server -c ${file}    # ${node.name}: clients on ${node.host}:${node.clientPort}`);
  }
  const urls = nodes.map((n) => `nats://${n.host}:${n.clientPort}`).join(",");
  process.stdout.write(
    `wrote ${nodes.length} node configs and ${AUTH_FILE} to ${out}; start each node${nodes[0]?.listen === "0.0.0.0" ? " on its host" : ""}:\n` +
      `${lines.join("\n")}\nthen run dirigent with NATS_URL=${urls} DIRIGENT_REPLICAS=3\n`,
  );
}

/** The streams of root `subjects` that `dirigent nats-setup` makes: KV buckets as their streams (`KV_<bucket>`). */
export function setupStreams(subjects: Subjects): string[] {
  return [
    ...[subjects.tasksBucket, subjects.turnsBucket, subjects.goalsBucket, subjects.indexBucket, subjects.bodiesBucket].map(
      jetStreamApi.bucketStream,
    ),
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
    // --scale-streams); the intake consumer gets this process's DIRIGENT_ACK_WAIT_MS, the turns bucket its
    // DIRIGENT_RECORDS_MAX_AGE_MS and DIRIGENT_RECORDS_MAX_BYTES.
    const placement = await place({
      ...(config.nats ? { url: config.nats } : {}),
      auth: natsAuth(config),
      replicas: config.replicas,
      scaleStreams: config.scaleStreams,
      records: { maxAgeMs: config.recordsMaxAgeMs, maxBytes: config.recordsMaxBytes },
      subjects,
      log,
      name: "dirigent-nats-setup",
      dataDir: config.dataDir,
      startServer: false,
    });
    try {
      const bus = placement.transport.bus;
      if (!(bus instanceof NatsBus)) throw new Error("no NATS server reachable: pass --nats URL or set NATS_URL");
      // The bodies bucket, which processes open on their first large body only.
      const replication = { replicas: config.replicas, scale: config.scaleStreams, log };
      await openKvStore(bus.connection, subjects.bodiesBucket, { ttlMs: BODIES_MAX_AGE_MS, replication });
      process.stdout.write(`root '${subjects.root}' is set up on ${placement.note}:\n${await describe(bus.connection, subjects)}\n`);
    } finally {
      await placement.close();
    }
  });
}
