import { describe, expect, it } from "vitest";
import { createSubjects, decode, encode, PingReply, PingRequest } from "../../protocol/index.js";
import { formatHealth, healthReport, parseRoles, parseTimeout, REQUIRED_ROLES } from "../../runtime/cli/health.js";
import { UsageError } from "../../runtime/cli/common.js";
import { rolePermissions } from "../../runtime/nats/conf/permissions.js";

const reply = (roles: string[], pid: number): PingReply => ({
  processId: `h:${pid}:abcd1234`,
  host: "h",
  pid,
  roles,
  version: "0.1.0",
  uptimeMs: 300_000,
});

describe("the ping", () => {
  it("is spelled under the subject root", () => {
    expect(createSubjects().ping).toBe("dirigent.ping");
    expect(createSubjects("acme.dirigent").ping).toBe("acme.dirigent.ping");
  });

  it("has a request naming at most one process, and a reply that names the process and its roles", () => {
    expect(decode(PingRequest, encode(PingRequest, {}))).toEqual({ ok: true, value: {} });
    expect(decode(PingRequest, encode(PingRequest, { processId: "h:1:x" }))).toEqual({ ok: true, value: { processId: "h:1:x" } });
    const unknown = decode(PingRequest, new TextEncoder().encode('{"processId":"x","extra":1}'));
    expect(unknown.ok).toBe(false);
    expect(decode(PingRequest, new TextEncoder().encode('{"processId":""}')).ok).toBe(false);
    expect(decode(PingReply, encode(PingReply, { ...reply(["handler"], 7), inFlight: 2 }))).toMatchObject({
      ok: true,
      value: { roles: ["handler"], inFlight: 2 },
    });
    const bad = decode(PingReply, new TextEncoder().encode('{"processId":"p","host":"h","pid":-1,"roles":[],"version":"1","uptimeMs":0}'));
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error.message).toMatch(/pid/);
  });

  it("may be answered by every runtime role, each also pinging itself, and asked by a submitter only", () => {
    const p = rolePermissions("acme.dirigent");
    for (const role of ["director", "evaluator", "handler", "memory", "supervisor"] as const) {
      expect(p[role].subscribe).toContain("acme.dirigent.ping");
      // Answers go to the asking submitter's inbox, and to the runtime role's that checks itself.
      expect(p[role].publish).toEqual(
        expect.arrayContaining(["acme.dirigent.ping", "_INBOX_acme:dirigent-submitter.>", `_INBOX_acme:dirigent-${role}.>`]),
      );
      expect(p[role].publish).not.toContain("_INBOX.>");
      expect(new Set(p[role].publish).size).toBe(p[role].publish.length);
    }
    expect(p.submitter.publish).toContain("acme.dirigent.ping");
    expect(p.submitter.subscribe).not.toContain("acme.dirigent.ping");
    expect([...p.inspector.publish, ...p.inspector.subscribe]).not.toContain("acme.dirigent.ping");
  });
});

describe("dirigent health", () => {
  it("validates --timeout and --roles at the boundary", () => {
    expect(parseTimeout(undefined)).toBe(1000);
    expect(parseTimeout("250")).toBe(250);
    for (const bad of ["0", "-5", "1.5", "abc", "60001", ""]) expect(() => parseTimeout(bad)).toThrow(UsageError);
    expect(parseRoles(undefined)).toEqual(REQUIRED_ROLES);
    expect(parseRoles("handler, director,handler")).toEqual(["handler", "director"]);
    expect(() => parseRoles("director,conductor")).toThrow(/'conductor' is not a role/);
    expect(() => parseRoles("")).toThrow(UsageError);
  });

  it("is ok when every required role answers, and names the missing ones otherwise", () => {
    const answers = [reply(["handler"], 3), reply(["director", "evaluator"], 1), reply(["memory"], 2)];
    const ok = healthReport(REQUIRED_ROLES, answers);
    expect(ok).toMatchObject({ ok: true, missing: [] });
    expect(ok.processes.map((p) => p.pid)).toEqual([1, 3, 2]);
    const text = formatHealth(ok);
    expect(text).toMatch(/^ROLE\s+PROCESS\s+HOST\s+PID\s+UPTIME\s+VERSION$/m);
    expect(text).toMatch(/^evaluator\s+h:1:abcd1234\s+h\s+1\s+5m\s+0\.1\.0$/m);
    expect(text).toMatch(/^ok: director, evaluator, handler, memory answer \(3 processes\)$/m);
    const missing = healthReport(REQUIRED_ROLES, answers.slice(0, 2));
    expect(missing).toMatchObject({ ok: false, missing: ["memory"] });
    expect(formatHealth(missing)).toMatch(/^missing: memory \(no process of this role answered\)$/m);
    expect(formatHealth(healthReport(["director", "supervisor"], []))).toMatch(/no process answered\nmissing: director, supervisor/);
  });
});
