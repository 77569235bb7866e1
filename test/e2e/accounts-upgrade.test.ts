/**
 * The upgrade path of docs/deploy.md ("Upgrading from the users of the global account"), steps 1 to 4 on one real
 * nats-server: a root's stores made in the global account, as the runtime made them before accounts; the server
 * stopped, the accounts block written, the root's stream directories moved from `$G` into its account's; the server
 * started again and `dirigent nats-setup` run as the root's admin. The role users of the new account find the task
 * record, the goal and the queued task.
 */
import { existsSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects } from "../../protocol/index.js";
import { setupStreams } from "../../runtime/cli/nats.js";
import { accountName } from "../../runtime/nats/conf/permissions.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { accountsConfig, natsSetup, rootUsers } from "../support/permissions-stack.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

const root = randomRoot();
const subjects = createSubjects(root);
const users = rootUsers(root);
const { as } = users;
const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array | undefined) => (data === undefined ? undefined : new TextDecoder().decode(data));

let server: TestNatsServer | undefined;
const transports: OpenTransport[] = [];

afterAll(async () => {
  for (const transport of transports) await transport.close();
  await server?.stop();
});

describe("upgrading a root from the global account to its own", () => {
  it("keeps its task records, goals and queued tasks, for the role users of its account", async () => {
    // Before: the global account, where the runtime created the root's streams.
    server = await startTestNatsServer({ config: 'jetstream { store_dir: ".dirigent/jetstream" }\n' });
    const before = await openNatsTransport(server.url, subjects, { name: "before-upgrade", log: silentLogger });
    await before.store.put("task-1", bytes("record of task-1"));
    await before.goals?.put("goal.g1", bytes("goal g1"));
    const queued = await before.queue.enqueue("task-2", bytes("queued task-2"));
    await before.close();

    // 1. The new block, each password from a variable (here in the file), the admin's included.
    const config = accountsConfig([users]);
    // 2. The server stopped; 3. the root's streams moved from `$G/streams` into its account's directory.
    const jetstream = join(server.dir, ".dirigent", "jetstream", "jetstream");
    const account = accountName(root);
    await server.restart(async () => {
      await writeFile(join(server?.dir ?? "", "nats.conf"), config, { mode: 0o600 });
      await mkdir(join(jetstream, account, "streams"), { recursive: true });
      // As the loop of the docs does, moving the streams that exist (the bodies bucket is made on a first large body).
      for (const stream of setupStreams(subjects)) {
        const from = join(jetstream, "$G", "streams", stream);
        if (existsSync(from)) await rename(from, join(jetstream, account, "streams", stream));
      }
    });
    // 4. The server restored them in the account; the admin step keeps them and creates nothing over them.
    expect(server.stderr()).toMatch(new RegExp(`Restored 1 messages for stream '${account} > KV_${subjects.tasksBucket}'`));
    const setup = await natsSetup(server.url, root, as("admin"));
    expect(setup).toContain(`KV_${subjects.tasksBucket}: 1 messages`);
    expect(setup).toContain(`${subjects.intakeStream}: 1 messages`);

    const director = await openNatsTransport(server.url, subjects, {
      name: "after-director",
      log: silentLogger,
      auth: as("director"),
      roles: ["director"],
    });
    transports.push(director);
    expect(text(await director.store.get("task-1"))).toBe("record of task-1");
    const peeked = await director.queue.peek("task-2");
    expect({ seq: peeked?.seq, data: text(peeked?.data) }).toEqual({ seq: queued.seq, data: "queued task-2" });
    const supervisor = await openNatsTransport(server.url, subjects, {
      name: "after-supervisor",
      log: silentLogger,
      auth: as("supervisor"),
      roles: ["supervisor"],
    });
    transports.push(supervisor);
    expect(await supervisor.goals?.keys()).toContain("goal.g1");
    expect(text(await supervisor.goals?.get("goal.g1"))).toBe("goal g1");
  });
});
