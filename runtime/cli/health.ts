/**
 * `dirigent health`: pings every runtime process on `<root>.ping`, lists those that answer, and exits 0 when every
 * required role answers, 1 naming the roles missing.
 */
import type { Command } from "commander";
import { decode, encode, Requests, type PingReply, type Subjects } from "../../protocol/index.js";
import { commonOptions, setup, UsageError, type CommonFlags } from "./common.js";
import { placeClient } from "../nats/connect.js";
import { NatsBus } from "../nats/bus.js";
import { wireOf } from "../nats/wire.js";
import { ROLES, type Role } from "../system.js";

/** The roles `dirigent health` requires by default: the task pipeline. The Supervisor runs only for goals. */
export const REQUIRED_ROLES: readonly Role[] = ["director", "evaluator", "handler", "memory"];
/** Default answer window. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1000;

interface HealthFlags extends CommonFlags {
  timeout?: string;
  roles?: string;
  host?: string;
  json?: boolean;
}

/** What `dirigent health` found. */
export interface HealthReport {
  /** Every required role answered. */
  ok: boolean;
  required: Role[];
  missing: Role[];
  /** The answers, sorted by first role, then process id. */
  processes: PingReply[];
  /** Answers that did not validate, as their error messages. */
  invalid: string[];
}

/** `--timeout`: a whole number of milliseconds from 1 to 60,000. */
export function parseTimeout(value: string | undefined): number {
  if (value === undefined) return DEFAULT_HEALTH_TIMEOUT_MS;
  const ms = Number(value);
  if (!/^\d+$/.test(value) || ms < 1 || ms > 60_000) throw new UsageError(`--timeout '${value}': expected milliseconds from 1 to 60000`);
  return ms;
}

/** `--roles`: a comma-separated list of roles, each one of {@link ROLES}. */
export function parseRoles(value: string | undefined): Role[] {
  if (value === undefined) return [...REQUIRED_ROLES];
  const names = value.split(",").map((r) => r.trim());
  const roles: Role[] = [];
  for (const name of names) {
    const role = ROLES.find((r) => r === name);
    if (role === undefined)
      throw new UsageError(`--roles '${value}': '${name}' is not a role (expected a comma-separated list of ${ROLES.join(", ")})`);
    if (!roles.includes(role)) roles.push(role);
  }
  return roles;
}

/** The report of a set of answers. */
export function healthReport(required: readonly Role[], answers: readonly PingReply[], invalid: readonly string[] = []): HealthReport {
  const seen = new Set(answers.flatMap((a) => a.roles));
  const missing = required.filter((r) => !seen.has(r));
  const processes = [...answers].sort(
    (a, b) => (a.roles[0] ?? "").localeCompare(b.roles[0] ?? "") || a.processId.localeCompare(b.processId),
  );
  return { ok: missing.length === 0, required: [...required], missing, processes, invalid: [...invalid] };
}

/** Sends one ping and collects the answers for `timeoutMs`. */
async function collect(bus: NatsBus, subjects: Subjects, timeoutMs: number): Promise<{ answers: PingReply[]; invalid: string[] }> {
  const answers: PingReply[] = [];
  const invalid: string[] = [];
  // The ping is the one request answered by every process: its definition (Requests.ping) gives subject and schemas.
  const ping = Requests.ping;
  const cancel = wireOf(bus.connection).requestMany(ping.subjectOf(subjects), encode(ping.request, {}), (msg) => {
    if (msg.data.length === 0) return; // 503: nobody listens
    const reply = decode(ping.reply, msg.data);
    if (reply.ok) answers.push(reply.value);
    else invalid.push(reply.error.message);
  });
  await new Promise((resolve) => setTimeout(resolve, timeoutMs));
  cancel();
  return { answers, invalid };
}

function formatUptime(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** The report as a table (one row per role of each process) and a verdict line. */
export function formatHealth(report: HealthReport): string {
  const rows = [["ROLE", "PROCESS", "HOST", "PID", "UPTIME", "VERSION"]];
  for (const p of report.processes) {
    for (const role of p.roles) rows.push([role, p.processId, p.host, String(p.pid), formatUptime(p.uptimeMs), p.version]);
  }
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  const lines =
    report.processes.length === 0
      ? ["no process answered"]
      : rows.map((r) =>
          r
            .map((cell, i) => cell.padEnd(widths[i] ?? 0))
            .join("  ")
            .trimEnd(),
        );
  for (const message of report.invalid) lines.push(`invalid answer ignored: ${message}`);
  lines.push(
    report.ok
      ? `ok: ${report.required.join(", ")} answer${report.required.length === 0 ? "" : ` (${report.processes.length} process${report.processes.length === 1 ? "" : "es"})`}`
      : `missing: ${report.missing.join(", ")} (no process of ${report.missing.length === 1 ? "this role" : "these roles"} answered)`,
  );
  return lines.join("\n") + "\n";
}

/** Registers `dirigent health`. */
export function registerHealthCommand(program: Command): void {
  commonOptions(
    program
      .command("health")
      .description("ping every runtime process; list the roles and processes that answer; exit 1 naming the required roles none answers")
      .option("--timeout <ms>", `how long to collect answers (default ${DEFAULT_HEALTH_TIMEOUT_MS})`)
      .option("--roles <list>", `comma-separated roles that must answer (default ${REQUIRED_ROLES.join(",")})`)
      .option("--host <name>", 'count only the processes on this host (a liveness probe of one machine or pod: --host "$(hostname)")')
      .option("--json", "print the report as JSON"),
  ).action(async (flags: HealthFlags) => {
    const timeoutMs = parseTimeout(flags.timeout);
    const required = parseRoles(flags.roles);
    if (flags.host !== undefined && flags.host.trim() === "") throw new UsageError("--host: expected a host name");
    const { config, subjects, log } = setup(flags, "dirigent-health");
    const placement = await placeClient(config, subjects, log, "dirigent-health");
    try {
      const bus = placement.transport.bus;
      if (!(bus instanceof NatsBus)) throw new Error("no NATS server reachable: pass --nats URL or set NATS_URL");
      const { answers, invalid } = await collect(bus, subjects, timeoutMs);
      const report = healthReport(required, flags.host === undefined ? answers : answers.filter((a) => a.host === flags.host), invalid);
      process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : formatHealth(report));
      if (!report.ok) {
        if (flags.json) process.stderr.write(`dirigent: missing: ${report.missing.join(", ")}\n`);
        process.exitCode = 1;
      }
    } finally {
      await placement.close();
    }
  });
}
