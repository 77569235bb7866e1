/**
 * The admin step of a root (`dirigent nats-setup`) and `dirigent nats-conf`'s refusals, on a real nats-server with
 * the generated accounts block: a worker whose root is not set up stops at start, naming the step; set up by the
 * root's admin (a role user may not), the worker starts, and the intake consumer has the admin's ack wait.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { millis } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { connectNats, type NatsConnection } from "../../runtime/nats/bus.js";
import { accountsConfig, natsSetup, rootUsers } from "../support/permissions-stack.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const root = randomRoot();
const subjects = createSubjects(root);
const users = rootUsers(root);
const { as, env } = users;

let server: TestNatsServer;
const processes: CliProcess[] = [];
const connections: NatsConnection[] = [];

beforeAll(async () => {
  server = await startTestNatsServer({ config: accountsConfig([users]) });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  for (const nc of connections) await nc.close();
  await server?.stop();
});

describe("dirigent nats-setup", () => {
  it("is the only way a root's streams come to be: a worker before it stops naming it, after it starts", async () => {
    const early = startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root], env("director"));
    processes.push(early);
    expect(await early.exited).toBe(1);
    expect(early.output()).toMatch(/STREAM\.CREATE.*only its admin creates them: run 'dirigent nats-setup' as the root's admin user/);

    // A role user cannot run the admin step either.
    const asRole = startCli(["nats-setup", "--nats", server.url, "--prefix", root], env("memory"));
    expect(await asRole.exited).toBe(1);
    expect(asRole.output()).toMatch(/permissions violation/i);

    await natsSetup(server.url, root, as("admin"));
    const again = startCli(["nats-setup", "--nats", server.url, "--prefix", root], { ...env("admin"), DIRIGENT_ACK_WAIT_MS: "45000" });
    expect(await again.exited).toBe(0);
    expect(again.stdout()).toContain(`${subjects.intakeStream} consumer ${subjects.directorConsumer}: ack wait 45000 ms`);

    const director = startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root], {
      ...env("director"),
      DIRIGENT_ACK_WAIT_MS: "20000",
      DIRIGENT_LOG_LEVEL: "warn",
    });
    processes.push(director);
    // The Director may not change the consumer: it runs with the admin's ack wait, and says so.
    await director.waitFor(/ready/);
    expect(director.output()).toMatch(/the intake consumer keeps ack wait 45000 ms/);
    const admin = await connectNats({ servers: server.url, name: "setup-check", ...as("admin") });
    connections.push(admin);
    const consumer = await (await jetstreamManager(admin)).consumers.info(subjects.intakeStream, subjects.directorConsumer);
    expect(millis(consumer.config.ack_wait ?? 0)).toBe(45000);
  });

  it("nats-conf refuses roots that share an account after dots and dashes become '_'", async () => {
    const clash = startCli(["nats-conf", "--prefix", "acme-x", "--prefix", "acme_x"]);
    expect(await clash.exited).toBe(2);
    expect(clash.output()).toMatch(/roots 'acme-x' and 'acme_x' are both account ACME_X/);
  });
});
