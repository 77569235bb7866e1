import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../runtime/config.js";
import { authorizationFailure, natsAuth } from "../../runtime/nats/auth.js";
import {
  accountName,
  inboxPrefixFor,
  natsUser,
  passwordVariable,
  renderAccounts,
  rolePermissions,
  rootsClash,
} from "../../runtime/nats/conf/permissions.js";
import { renderToolServiceUsers, toolServicePasswordVariable, toolServiceUser } from "../../runtime/nats/conf/tool-service-users.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-auth-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("NATS credentials", () => {
  it("come from NATS_USER with NATS_PASSWORD, or with the first line of --nats-password-file, or NATS_TOKEN", async () => {
    expect(natsAuth(loadConfig({}, { NATS_USER: "handler", NATS_PASSWORD: "s3cret" }))).toEqual({ user: "handler", pass: "s3cret" });
    const file = join(dir, "pw");
    await writeFile(file, "from-file\nignored\n");
    expect(natsAuth(loadConfig({ natsUser: "director", natsPasswordFile: file }, {}))).toEqual({ user: "director", pass: "from-file" });
    expect(natsAuth(loadConfig({}, { NATS_TOKEN: "tok" }))).toEqual({ token: "tok" });
    expect(natsAuth(loadConfig({}, {}))).toEqual({});
  });

  it("refuse a user without a password, a password without a user and an unreadable file, without showing secrets", () => {
    expect(() => natsAuth(loadConfig({}, { NATS_USER: "handler" }))).toThrow(ConfigError);
    expect(() => natsAuth(loadConfig({}, { NATS_PASSWORD: "s3cret" }))).toThrow(/without a user/);
    expect(() => natsAuth(loadConfig({ natsUser: "x", natsPasswordFile: join(dir, "missing") }, {}))).toThrow(/cannot be read/);
    const err = authorizationFailure("nats://h:4222", { user: "handler", pass: "s3cret" }, new Error("Authorization Violation"));
    expect(err.message).toMatch(/authorization violation/);
    expect(err.message).not.toContain("s3cret");
  });
});

describe("per-role permissions", () => {
  it("keep internal subjects and stores away from submitters and inspectors", () => {
    const p = rolePermissions("acme.dirigent");
    for (const role of ["submitter", "inspector"] as const) {
      // The inspector reads the events stream, nothing else of JetStream, and never writes to it.
      const readEvents = (subject: string) =>
        role === "inspector" && /^\$JS\.API\.STREAM\.(INFO|MSG\.GET)\.ACME_DIRIGENT_EVENTS$/.test(subject);
      // The submitter sends and reads bodies larger than one message through the bodies bucket (runtime/nats/chunks.ts).
      const bodies = (subject: string) => role === "submitter" && /(^|\.|_)ACME_DIRIGENT_BODIES(\.>)?$/.test(subject);
      const all = [...p[role].publish.filter((s) => !readEvents(s) && !bodies(s)), ...p[role].subscribe].join(" ");
      expect(all).not.toMatch(/\$JS|\$KV|intake|handler|evaluator\.|memory\.match|progress|control/);
      expect(p[role].publish.join(" ")).not.toContain(".inspect.");
    }
    expect(p.inspector.publish.filter((s) => s.startsWith("$JS"))).toEqual([
      "$JS.API.STREAM.INFO.ACME_DIRIGENT_EVENTS",
      "$JS.API.STREAM.MSG.GET.ACME_DIRIGENT_EVENTS",
    ]);
    expect(p.inspector.subscribe).toContain("acme.dirigent.inspect.>");
    expect(p.director.publish).toContain("$JS.ACK.ACME_DIRIGENT_INTAKE.>");
    expect(inboxPrefixFor(["handler"])).toBe("_INBOX_handler");
    expect(inboxPrefixFor(["director", "handler"])).toBe("_INBOX");
    expect(inboxPrefixFor([])).toBe("_INBOX");
    expect(inboxPrefixFor([], "acme.dirigent-submitter")).toBe("_INBOX_acme:dirigent-submitter");
    expect(inboxPrefixFor(["director", "handler"], "ops")).toBe("_INBOX_ops");
  });

  it("name every user and its inbox after its root, and give no user the shared _INBOX", () => {
    expect(natsUser("dirigent", "handler")).toBe("handler");
    expect(natsUser("acme.dirigent", "handler")).toBe("acme.dirigent-handler");
    expect(passwordVariable("handler")).toBe("DIRIGENT_NATS_HANDLER_PASSWORD");
    expect(passwordVariable("handler", "acme.di-rigent")).toBe("DIRIGENT_NATS_ACME_DI_RIGENT_HANDLER_PASSWORD");
    const p = rolePermissions("acme");
    const all = Object.values(p).flatMap((r) => [...r.publish, ...r.subscribe]);
    expect(all.filter((s) => s.startsWith("_INBOX.") || s === "_INBOX.>")).toEqual([]);
    expect(all.filter((s) => s.startsWith("_INBOX")).every((s) => s.startsWith("_INBOX_acme-"))).toBe(true);
    // Each user reads its own inbox only; the Director answers submitters, Supervisors and inspectors.
    for (const [role, r] of Object.entries(p)) expect(r.subscribe.filter((s) => s.startsWith("_INBOX"))).toEqual([`_INBOX_acme-${role}.>`]);
    expect(p.director.publish).toEqual(
      expect.arrayContaining(["_INBOX_acme-submitter.>", "_INBOX_acme-supervisor.>", "_INBOX_acme-inspector.>"]),
    );
    expect(p.memory.publish.filter((s) => s.startsWith("_INBOX"))).toContain("_INBOX_acme-evaluator.>");
    expect(p.submitter.publish.filter((s) => s.startsWith("_INBOX"))).toEqual([]);
  });

  it("let each runtime role publish inspection messages under its own role name only", () => {
    const p = rolePermissions("acme.dirigent");
    for (const role of ["director", "evaluator", "handler", "memory"] as const) {
      expect(p[role].publish.filter((s) => s.includes(".inspect."))).toEqual([`acme.dirigent.inspect.${role}.>`]);
    }
  });

  it("create no stream and no consumer: that is the admin step's (dirigent nats-setup)", () => {
    const p = rolePermissions("acme");
    for (const [role, r] of Object.entries(p)) {
      const api = r.publish.filter((s) => s.startsWith("$JS.API."));
      expect(
        api.filter((s) => /\.(STREAM|CONSUMER)\.(CREATE|UPDATE|DELETE)\.|\.DURABLE\.|^\$JS\.API\.>$/.test(s)),
        role,
      ).toEqual([]);
    }
    // The Memory user follows the index pointer as plain messages of its subject, with no consumer.
    expect(p.memory.subscribe).toContain("$KV.ACME_INDEX.current");
  });

  it("render one account per root, passwords as server variables, and no top-level authorization block", () => {
    const text = renderAccounts("dirigent");
    expect(text).toContain("password: $DIRIGENT_NATS_SUBMITTER_PASSWORD");
    expect(text).not.toMatch(/authorization|no_auth_user|user: dev/);
    const two = renderAccounts(["acme", "globex"]);
    expect(two.match(/accounts \{/g)).toHaveLength(1);
    expect(two).toMatch(
      /ACME: \{\s+jetstream: enabled\s+users = \[\s+\{ user: "acme-submitter", password: \$DIRIGENT_NATS_ACME_SUBMITTER_PASSWORD/,
    );
    expect(two).toContain('{ user: "globex-admin", password: $DIRIGENT_NATS_GLOBEX_ADMIN_PASSWORD');
    // Each root's users sit in its own account only.
    const globex = two.slice(two.indexOf("GLOBEX: {"));
    expect(globex).not.toContain("acme-");
  });

  it("refuse roots whose accounts, streams and password variables would be the same", () => {
    expect(accountName("acme.prod-eu")).toBe("ACME_PROD_EU");
    expect(rootsClash(["acme", "globex", "acme.eu"])).toBeUndefined();
    expect(rootsClash(["acme-x", "acme_x"])).toMatch(/'acme-x' and 'acme_x' are both account ACME_X/);
    expect(rootsClash(["acme.x", "globex", "acme-x"])).toMatch(/'acme\.x' and 'acme-x'/);
    expect(() => renderAccounts(["acme-x", "acme_x"])).toThrow(/both account ACME_X/);
  });
});

describe("tool service users", () => {
  it("receive their own calls and discovery only, and publish nothing but answers", () => {
    expect(toolServiceUser("dirigent", "weather")).toBe("tool-weather");
    expect(toolServiceUser("acme", "weather")).toBe("acme-tool-weather");
    expect(toolServicePasswordVariable("acme", "my-svc")).toBe("DIRIGENT_NATS_ACME_TOOL_MY_SVC_PASSWORD");
    expect(renderToolServiceUsers("acme", ["weather"])).toEqual([
      '    { user: "acme-tool-weather", password: $DIRIGENT_NATS_ACME_TOOL_WEATHER_PASSWORD, permissions: {',
      '        publish: { deny: [">"] }',
      '        subscribe: { allow: ["$SRV.*", "$SRV.*.weather", "$SRV.*.weather.*", "acme.tools.weather.>"] }',
      '        allow_responses: { max: 1, expires: "1h" }',
      "    } }",
    ]);
    // The Handler may ask one service by name.
    expect(rolePermissions("acme").handler.publish).toEqual(expect.arrayContaining(["$SRV.INFO", "$SRV.INFO.*", "acme.tools.>"]));
    expect(renderAccounts("acme", { toolServices: ["weather", "calc"] })).toMatch(
      /ACME: \{[\s\S]*acme-tool-weather[\s\S]*acme-tool-calc[\s\S]*\n {4}\]\n {2}\}\n\}\n$/,
    );
  });

  it("refuse a service name unfit for a subject, and two names sharing a password variable", () => {
    for (const bad of ["a.b", "a*", ">", "", "x".repeat(65)])
      expect(() => renderToolServiceUsers("acme", [bad])).toThrow(/a service name has 1 to 64 letters/);
    expect(() => renderToolServiceUsers("acme", ["my-svc", "my_svc"])).toThrow(
      "tool services 'my-svc' and 'my_svc' would share the password variable DIRIGENT_NATS_ACME_TOOL_MY_SVC_PASSWORD",
    );
  });
});
