/**
 * Liveness of a runtime process: it answers pings on `<root>.ping` (see protocol/health.ts), and it checks, through
 * the server, that its own subscriptions still reach it.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { NoRespondersError, type Bus, type BusSubscription } from "../actors/bus.js";
import { messageOf, type Logger } from "../actors/deps.js";
import { respond } from "../actors/serve.js";
import { decode, encode, Requests, type PingReply, type PingRequest, type Subjects } from "../protocol/index.js";

/** dirigent's version, from its package.json (`0.0.0` when none is found). */
export const VERSION: string = (() => {
  // dist/runtime/ and runtime/ sit at different depths below the package root.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 3; up++, dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "dirigent" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // not here
    }
  }
  return "0.0.0";
})();

/** A new process id: host, pid and a random part (a restarted process gets a new one, even with the same pid). */
export function newProcessId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Options of {@link startPingResponder}. */
export interface PingResponderOptions {
  bus: Bus;
  subjects: Subjects;
  /** The roles this process runs. */
  roles: readonly string[];
  log: Logger;
  /** Default: {@link newProcessId}. */
  processId?: string;
  /** Handlers running now, when the transport counts them. */
  inFlight?: () => number | undefined;
}

/** A running ping responder. */
export interface PingResponder {
  readonly processId: string;
  stop(): Promise<void>;
}

/**
 * Answers every {@link PingRequest} on `<root>.ping` (a plain subscription: every process answers) with this process's
 * {@link PingReply}; a request naming another process is ignored, an invalid one is logged and ignored.
 */
export function startPingResponder(options: PingResponderOptions): PingResponder {
  const { bus, subjects, roles, log } = options;
  const processId = options.processId ?? newProcessId();
  const startedAt = Date.now();
  const host = hostname();
  const sub: BusSubscription = bus.subscribe(Requests.ping.servedOn(subjects), (msg) => {
    if (!msg.expectsReply) return;
    const request = msg.data.length === 0 ? { ok: true as const, value: {} } : decode(Requests.ping.request, msg.data);
    if (!request.ok) {
      log.warn({ subject: msg.subject, err: request.error.message }, "invalid ping ignored");
      return;
    }
    if (request.value.processId !== undefined && request.value.processId !== processId) return;
    const inFlight = options.inFlight?.();
    respond(msg, Requests.ping, {
      processId,
      host,
      pid: process.pid,
      roles: [...roles],
      version: VERSION,
      uptimeMs: Date.now() - startedAt,
      ...(inFlight !== undefined ? { inFlight } : {}),
    });
  });
  return { processId, stop: () => sub.unsubscribe() };
}

/** What a self-check found: the process's answer came back, nobody listens (its subscriptions are gone), or neither. */
export type SelfCheck = "ok" | "lost" | "unknown";

/** Pings this process through the server. `lost`: the server knows no subscription of it on the ping subject. */
export async function checkSelf(bus: Bus, subjects: Subjects, processId: string, timeoutMs: number): Promise<SelfCheck> {
  try {
    const answer = decode(
      Requests.ping.reply,
      await bus.request(Requests.ping.subjectOf(subjects), encode(Requests.ping.request, { processId }), { timeoutMs }),
    );
    return answer.ok && answer.value.processId === processId ? "ok" : "unknown";
  } catch (err) {
    // A timeout or a broken connection says nothing of the subscriptions: the connection's own status loop handles those.
    return err instanceof NoRespondersError ? "lost" : "unknown";
  }
}

/** The connection a {@link superviseConnection} watches (a `NatsBus`). */
export interface WatchedConnection {
  /** Resolves when the connection is closed for good, with the reason when there was one. */
  closed(): Promise<Error | undefined>;
  /** Drops the connection and connects again, sending every subscription again. */
  reconnect(): Promise<void>;
  onReconnect?(listener: () => void): () => void;
}

/** Options of {@link superviseConnection}. */
export interface SuperviseOptions {
  connection: WatchedConnection;
  /** One self-check (see {@link checkSelf}). */
  selfCheck: () => Promise<SelfCheck>;
  /** Time between self-checks; 0: only after each reconnect. */
  checkIntervalMs: number;
  /** Self-checks in a row that find the subscriptions gone, each followed by a forced reconnect, before giving up. Default 3. */
  maxLost?: number;
  log: Logger;
  /** Called once, when this process cannot serve any more: the connection closed, or its subscriptions stay lost. */
  onFatal: (reason: string) => void;
}

/**
 * Watches a process's connection: a close the process did not ask for (call `stop` before closing it yourself) is
 * fatal; subscriptions found gone by a self-check get a forced reconnect (which sends them all again), and are fatal
 * when still gone after `maxLost` checks in a row.
 */
export function superviseConnection(options: SuperviseOptions): { stop(): void } {
  const { connection, log } = options;
  const maxLost = options.maxLost ?? 3;
  let stopped = false;
  let lost = 0;
  let checking = false;
  const fatal = (reason: string) => {
    if (stopped) return;
    stop();
    options.onFatal(reason);
  };
  const check = async () => {
    if (stopped || checking) return;
    checking = true;
    try {
      const result = await options.selfCheck();
      if (stopped || result === "unknown") return;
      if (result === "ok") {
        if (lost > 0) log.warn({ checks: lost }, "subscriptions reach this process again");
        lost = 0;
        return;
      }
      lost++;
      if (lost >= maxLost) {
        fatal(
          `this process's subscriptions no longer reach it (no responders on its own ping, ${lost} checks in a row, each followed by a reconnect)`,
        );
        return;
      }
      log.error({ checks: lost }, "this process's subscriptions no longer reach it: reconnecting to send them again");
      await connection.reconnect().catch((err: unknown) => log.error({ err: messageOf(err) }, "forced reconnect failed"));
    } finally {
      checking = false;
    }
  };
  void connection.closed().then(
    (err) => fatal(`the connection to NATS closed${err ? `: ${err.message}` : " (no error given)"}`),
    (err: unknown) => fatal(`the connection to NATS closed: ${messageOf(err)}`),
  );
  const removeListener = connection.onReconnect?.(() => {
    log.warn({}, "reconnected to NATS: checking that this process's subscriptions reach it");
    void check();
  });
  const timer = options.checkIntervalMs > 0 ? setInterval(() => void check(), options.checkIntervalMs) : undefined;
  timer?.unref();
  function stop(): void {
    stopped = true;
    clearInterval(timer);
    removeListener?.();
  }
  return { stop };
}
