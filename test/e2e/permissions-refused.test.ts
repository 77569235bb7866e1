/**
 * Per-role users and permissions (runtime/nats/conf/permissions.ts), what they refuse, against a real nats-server started
 * with the production form of the authorization block (test/support/permissions-stack.ts): a submitter cannot reach
 * internal subjects, the task records or the intake stream; an inspector cannot publish or write; clients without
 * credentials or with a wrong password are refused with a clear error. Also: `nats.conf` is not stale.
 * (test/e2e/permissions-allowed.test.ts checks what they allow.)
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { place } from "../../runtime/nats/connect.js";
import { natsTaskReplay } from "../../runtime/inspect/replay.js";
import { startInspectServer } from "../../runtime/inspect/server.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { GENERATED_BEGIN, GENERATED_END, renderDevAuthorization, userInboxPrefix } from "../../runtime/nats/conf/permissions.js";
import { usePermissionsStack } from "../support/permissions-stack.js";
import { startCli } from "../support/processes.js";

const stack = usePermissionsStack();
const { root, subjects, passwords, as, violations, connectAs } = stack;

describe("a submitter", () => {
  it("cannot publish to internal subjects", async () => {
    const nc = await connectAs("submitter");
    for (const subject of [subjects.execute, subjects.intake("x"), subjects.evaluate, subjects.cancelBroadcast]) {
      await expect(nc.request(subject, new Uint8Array(), { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
    }
    expect(violations().join("\n")).toMatch(new RegExp(`Publish Violation.*"${subjects.execute.replace(/\./g, "\\.")}"`, "i"));
  });

  it("cannot read the task records nor the intake stream", async () => {
    const nc = await connectAs("submitter");
    await expect(new Kvm(nc).open(subjects.tasksBucket).then((kv) => kv.get("anything"))).rejects.toThrow(/permissions violation/i);
    for (const subject of [`$KV.${subjects.tasksBucket}.>`, subjects.anyIntake, `${userInboxPrefix(as("director").user)}.>`, "_INBOX.>"]) {
      const sub = nc.subscribe(subject);
      const closed = (async () => {
        try {
          for await (const _ of sub) return "message";
          return "closed";
        } catch (err) {
          return String(err);
        }
      })();
      expect(await closed).toMatch(/permissions violation/i);
    }
  });
});

describe("an inspector", () => {
  it("cannot submit, cancel or answer a task, publish to internal subjects, as another role's inspection, nor write to or consume from JetStream", async () => {
    const nc = await connectAs("inspector");
    // Forking an ended task (`tasks.<id>.rerun`, its page's "Re-run from here") is the one change it may ask for.
    const forbidden = [
      subjects.submit,
      subjects.taskCancel("x"),
      subjects.taskInput("x"),
      subjects.compile,
      subjects.execute,
      subjects.evaluate,
      subjects.intake("x"),
      subjects.cancelBroadcast,
      subjects.inspect("director", "snapshot"),
      `$KV.${subjects.tasksBucket}.x`,
      `$JS.API.CONSUMER.CREATE.${subjects.eventsStream}.spy`,
      `$JS.API.STREAM.PURGE.${subjects.eventsStream}`,
      `$JS.API.STREAM.DELETE.${subjects.eventsStream}`,
    ];
    for (const subject of forbidden)
      await expect(nc.request(subject, new Uint8Array(), { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
  });

  it("a runtime role cannot publish inspection messages as another role", async () => {
    const nc = await connectAs("memory");
    await expect(nc.request(subjects.inspect("director", "snapshot"), "{}", { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
  });

  it("a user without read access to the events stream gets the replay error reported, not an empty list", async () => {
    const nc = await connectAs("submitter");
    const errors: unknown[] = [];
    await using inspector = await startInspectServer({
      bus: new NatsBus(nc, { onError: () => undefined }),
      subjects,
      port: 0,
      replay: natsTaskReplay(nc, subjects),
      onReplayError: (err) => void errors.push(err),
    });
    expect(String(errors[0])).toMatch(/cannot read the events stream.*permissions violation/i);
    const state = (await (await fetch(new URL("/api/state", inspector.url))).json()) as { replayError?: string };
    expect(state.replayError).toMatch(/permissions violation/i);
    const task = await fetch(new URL("/api/tasks/finished-long-ago", inspector.url));
    expect(task.status).toBe(502);
  });
});

describe("authentication", () => {
  it("refuses a client without credentials", async () => {
    await expect(connectNats({ servers: stack.server.url, name: "anonymous" })).rejects.toThrow(/authorization violation/i);
  });

  it("refuses a wrong password with a clear error", async () => {
    await expect(
      place({
        url: stack.server.url,
        auth: { user: as("submitter").user, pass: "wrong" },
        roles: [],
        subjects,
        log: silentLogger,
        name: "wrong",
        dataDir: stack.server.dir,
        startServer: false,
      }),
    ).rejects.toThrow(/NATS at .*: authorization violation: the server refused the connection as user '[a-z0-9_-]+-submitter'/);
  });

  it("refuses a user running a role it has no permissions for with a clear error", async () => {
    await expect(
      place({
        url: stack.server.url,
        auth: as("submitter"),
        roles: ["director"],
        subjects,
        log: silentLogger,
        name: "wrong-role",
        dataDir: stack.server.dir,
        startServer: false,
      }),
    ).rejects.toThrow(/Permissions Violation.*user '[a-z0-9_-]+-submitter' lacks the permissions of the director role/);
  });

  it("the CLI exits 1 with 'authorization violation' on a wrong password, and works with the right one from a file", async () => {
    const bad = startCli(["status", "nope", "--nats", stack.server.url, "--prefix", root, "--nats-user", as("submitter").user], {
      NATS_PASSWORD: "wrong",
    });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toMatch(/authorization violation/i);
    expect(bad.output()).not.toContain("wrong");
    const file = join(stack.server.dir, "submitter.password");
    await writeFile(file, `${passwords.submitter}\n`, { mode: 0o600 });
    const good = startCli([
      "status",
      "nope",
      "--nats",
      stack.server.url,
      "--prefix",
      root,
      "--nats-user",
      as("submitter").user,
      "--nats-password-file",
      file,
    ]);
    expect(await good.exited).toBe(1);
    expect(good.output()).toMatch(/no task 'nope'/);
    expect(violations()).not.toEqual(expect.arrayContaining([expect.stringContaining(".get")]));
  });
});

describe("nats.conf", () => {
  it("holds the current development authorization block (regenerate with `dirigent nats-conf --dev`)", () => {
    const text = readFileSync(fileURLToPath(new URL("../../nats.conf", import.meta.url)), "utf8");
    const start = text.indexOf(GENERATED_BEGIN);
    const end = text.indexOf(GENERATED_END);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(text.slice(start, end + GENERATED_END.length + 1)).toBe(renderDevAuthorization());
  });
});
