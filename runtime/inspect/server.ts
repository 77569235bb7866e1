/**
 * The HTTP side of `dirigent inspect`: serves the page and its assets from the package (loopback only, no external
 * resource), the machines' charts, the cluster's state as JSON, one task (replayed from the events stream when it
 * is not live), a task's node records and one node's conversation (asked of a Director, runtime/inspect/nodes.ts),
 * and a Server-Sent Events stream of changes fed by a subscription to `<root>.inspect.>` and the
 * tasks' events and results. Every request passes the checks of `runtime/inspect/guard.ts` (its `Host` must name this
 * server, its `Origin`, if any, must be the server's own) and every answer carries a strict Content-Security-Policy.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Bus, BusSubscription } from "../../actors/bus.js";
import { decode, parseTaskId, TaskEvent, TaskOutcome, type Subjects, type TaskId } from "../../protocol/index.js";
import { InspectMessage } from "../../protocol/inspect.js";
import { machineGraph } from "../charts/graph.js";
import { machines } from "../charts/registry.js";
import { allowedHosts, listenGuarded, refusal, SECURITY_HEADERS as COMMON_HEADERS } from "./guard.js";
import { machineCharts as chartCache } from "../charts/cache.js";
import { InspectState, type ActorView, type TaskView } from "./state.js";
import { messageOf } from "../../protocol/errors.js";
import { nodeApi } from "./nodes.js";

/** Largest body of `POST /api/tasks/<id>/rerun` (a changed template with its inputs). */
const MAX_RERUN_BODY_BYTES = 4 * 1024 * 1024;

/** The body of `req` as text, or `undefined` once it exceeds `max` bytes. */
async function readBody(req: IncomingMessage, max: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > max) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A stored task message (an event or a result) read back from the events stream. */
export interface ReplayedMessage {
  subject: string;
  data: Uint8Array;
}

/** Reading finished tasks back from the events stream (NATS JetStream); absent on the in-process bus. */
export interface TaskReplay {
  /** One task's stored events and result, in order. */
  task(taskId: TaskId): Promise<ReplayedMessage[]>;
  /** The most recent stored messages of all tasks, in order. */
  recent(max: number): Promise<ReplayedMessage[]>;
}

/** Options of {@link startInspectServer}. */
export interface InspectServerOptions {
  bus: Bus;
  subjects: Subjects;
  /** TCP port; 0 picks a free one. */
  port: number;
  /** Interface to listen on; loopback (`127.0.0.1`) by default. */
  host?: string;
  /**
   * More `Host` header values the server answers (`NAME` or `NAME:PORT`, validated by `parseAllowedHost`), for a
   * server bound to another interface or behind a proxy. The bound address with its port, and on loopback
   * `localhost`, `127.0.0.1` and `[::1]` with the port, are always answered; any other host gets 421.
   */
  allowedHosts?: readonly string[];
  replay?: TaskReplay;
  /** Stored messages read at start, so that recent finished tasks are listed. Default 2000. */
  replayRecent?: number;
  /** How often changes are pushed to the pages. Default 50 ms. */
  pushIntervalMs?: number;
  /** Receives every inspection message too (the Stately bridge). */
  onMessage?: (message: InspectMessage) => void;
  /** Directory of the page's files; the package's `inspector/` by default. */
  assetsDir?: string;
  /** Told when reading the events stream fails (e.g. the NATS user lacks the JetStream API rights); also shown on the page. */
  onReplayError?: (err: unknown) => void;
  /**
   * Most bytes of the change stream (`/api/stream`) waiting to be sent to one client, which does not read them (a
   * stalled page, a client that never reads): past it the client is dropped, not buffered for without bound.
   * Default {@link DEFAULT_STREAM_BUFFER_BYTES}.
   */
  maxStreamBufferBytes?: number;
  /** Told, with the reason, of each client of the change stream dropped for not reading. */
  onClientDropped?: (reason: string) => void;
}

/** Default of {@link InspectServerOptions.maxStreamBufferBytes}: 4 MiB, minutes of a busy cluster's changes. */
export const DEFAULT_STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

/** A running inspector server. */
export interface InspectServer extends AsyncDisposable {
  /** `http://<bound address>:<port>/` (`127.0.0.1` when bound to every interface). */
  readonly url: string;
  readonly port: number;
  readonly state: InspectState;
  close(): Promise<void>;
}

/** The page's files shipped in the package (`inspector/`), found from the source or the built module. */
export function packagedAssetsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [resolve(here, "../../inspector"), resolve(here, "../../../inspector")];
  return candidates.find((dir) => existsSync(join(dir, "index.html"))) ?? (candidates[1] as string);
}

const ASSETS: Record<string, string> = {
  "/": "index.html",
  "/app.js": "app.js",
  "/dom.js": "dom.js",
  "/task-tree.js": "task-tree.js",
  "/nodes.js": "nodes.js",
  "/conversation.js": "conversation.js",
  "/rerun.js": "rerun.js",
  "/app.css": "app.css",
};
const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};
/** The page's script and style come from this server only; no inline script or style, no frame, no form target. */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const SECURITY_HEADERS = { ...COMMON_HEADERS, "content-security-policy": PAGE_CSP };

/** The machines' charts, as the page loads them: name, machine id, SVG (prebuilt, or laid out once) and state ids. */
export async function machineCharts(): Promise<Array<{ name: string; id: string; svg: string; states: string[] }>> {
  return Promise.all(
    machines.map(async (named) => {
      const graph = machineGraph(named.machine);
      return { name: named.name, id: graph.id, svg: await chartCache.svg(named), states: graph.states.map((s) => s.id) };
    }),
  );
}

/** Filters of `/api/state`: task id (substring), role and process (exact). */
export interface ViewFilter {
  task?: string | undefined;
  role?: string | undefined;
  process?: string | undefined;
}

/** The part of a view that passes `filter`. */
export function filterView(
  view: { actors: ActorView[]; tasks: TaskView[] },
  filter: ViewFilter,
): { actors: ActorView[]; tasks: TaskView[] } {
  const actors = view.actors.filter(
    (a) =>
      (!filter.task || (a.taskId ?? "").includes(filter.task)) &&
      (!filter.role || a.role === filter.role) &&
      (!filter.process || a.process === filter.process),
  );
  const tasks = view.tasks.filter(
    (t) =>
      (!filter.task || t.taskId.includes(filter.task)) &&
      (!filter.role || t.roles.includes(filter.role)) &&
      (!filter.process || t.processes.includes(filter.process)),
  );
  return { actors, tasks };
}

/** The finished tasks read back from the events stream into `state`, and the last failure to read them. */
function storedTasks(state: InspectState, options: InspectServerOptions) {
  const applyStored = (m: ReplayedMessage) => {
    if (m.subject.endsWith(".events")) {
      const event = decode(TaskEvent, m.data);
      if (event.ok) state.applyTaskEvent(event.value, true);
    } else {
      const outcome = decode(TaskOutcome, m.data);
      if (outcome.ok) state.applyOutcome(outcome.value, true);
    }
  };
  /** The last replay failure, shown on the page (`replayError` of `/api/state`) until a replay succeeds. */
  let replayError: string | undefined;
  const load = async (read: () => Promise<ReplayedMessage[]>): Promise<void> => {
    let messages: ReplayedMessage[];
    try {
      messages = await read();
      replayError = undefined;
    } catch (err) {
      replayError = `cannot replay finished tasks from the events stream: ${messageOf(err)}`;
      options.onReplayError?.(err);
      return;
    }
    for (const m of messages) applyStored(m);
  };
  const replay = options.replay;
  return {
    error: () => replayError,
    /** Reads the most recent stored messages of all tasks (at start). */
    recent: async () => {
      if (replay) await load(() => replay.recent(options.replayRecent ?? 2000));
    },
    /** Reads one task that is not live, if the events stream holds it. */
    task: async (taskId: TaskId) => {
      if (!state.hasTask(taskId) && replay) await load(() => replay.task(taskId));
    },
  };
}

/** Subscribes `state` to the cluster's inspection messages and its tasks' events and results. */
function followCluster(state: InspectState, options: InspectServerOptions): BusSubscription[] {
  const { bus, subjects } = options;
  return [
    bus.subscribe(subjects.anyInspect, (msg) => {
      const decoded = decode(InspectMessage, msg.data);
      if (!decoded.ok) return;
      state.apply(decoded.value);
      options.onMessage?.(decoded.value);
    }),
    bus.subscribe(subjects.anyTaskEvents, (msg) => {
      const decoded = decode(TaskEvent, msg.data);
      if (decoded.ok) state.applyTaskEvent(decoded.value);
    }),
    bus.subscribe(subjects.anyTaskResult, (msg) => {
      const decoded = decode(TaskOutcome, msg.data);
      if (decoded.ok) state.applyOutcome(decoded.value);
    }),
  ];
}

/** The change stream (`/api/stream`): `state`'s changes pushed to its clients as Server-Sent Events, with keepalives. */
function changeStream(state: InspectState, options: InspectServerOptions) {
  const clients = new Set<ServerResponse>();
  const maxBuffered = options.maxStreamBufferBytes ?? DEFAULT_STREAM_BUFFER_BYTES;
  /** Writes `frame` to every client of the stream; one that left more than `maxBuffered` bytes unread is dropped. */
  const send = (frame: string) => {
    for (const client of clients) {
      if (client.writableLength > maxBuffered) {
        clients.delete(client);
        const peer = `${client.socket?.remoteAddress ?? "?"}:${client.socket?.remotePort ?? "?"}`;
        options.onClientDropped?.(
          `inspector: dropped the change stream of ${peer}: it left ${client.writableLength} bytes unread, more than ${maxBuffered}; a page that reloads gets the state anew`,
        );
        client.destroy();
      } else client.write(frame);
    }
  };
  const push = setInterval(() => {
    const delta = state.takeDelta();
    if (!delta || clients.size === 0) return;
    send(`data: ${JSON.stringify(delta)}\n\n`);
  }, options.pushIntervalMs ?? 50);
  const keepalive = setInterval(() => send(": keepalive\n\n"), 15_000);
  return {
    /** Opens the stream on `res` until its request closes. */
    open(req: IncomingMessage, res: ServerResponse) {
      res.writeHead(200, { "content-type": "text/event-stream", connection: "keep-alive", ...SECURITY_HEADERS });
      res.write(": connected\n\n");
      clients.add(res);
      req.on("close", () => clients.delete(res));
    },
    close() {
      clearInterval(push);
      clearInterval(keepalive);
      for (const client of clients) client.end();
      clients.clear();
    },
  };
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...SECURITY_HEADERS });
  res.end(typeof body === "string" ? body : JSON.stringify(body));
};

/**
 * The task id in a `/api/tasks/<id>…` path, checked: the path comes from the page (or anyone who can reach the
 * server). An illegal one is answered 400 here, as a Director answers it (`INVALID_ID`), and is `undefined`.
 */
function pathTaskId(res: ServerResponse, segment: string | undefined): TaskId | undefined {
  const given = decodeURIComponent(segment ?? "");
  const taskId = parseTaskId(given);
  if (taskId === undefined)
    json(res, 400, { error: `task id '${given.slice(0, 100)}': must be 1–64 characters of [A-Za-z0-9_-]`, code: "INVALID_ID" });
  return taskId;
}

/** `POST /api/tasks/<id>/rerun`: a JSON body of bounded size, handed to a Director. */
async function rerun(req: IncomingMessage, res: ServerResponse, nodes: ReturnType<typeof nodeApi>, taskId: TaskId): Promise<void> {
  // JSON only: a cross-site form cannot send it without a preflight (and the guard refuses a foreign Origin).
  if (!/^application\/json\b/.test(req.headers["content-type"] ?? "")) return json(res, 415, { error: "send JSON" });
  const body = await readBody(req, MAX_RERUN_BODY_BYTES);
  if (body === undefined) return json(res, 413, { error: `the body exceeds ${MAX_RERUN_BODY_BYTES} bytes` });
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return json(res, 400, { error: "the body is not JSON" });
  }
  const answer = await nodes.rerun(taskId, parsed);
  return json(res, answer.status, answer.body);
}

/** `GET /api/tasks/<id>/nodes` (a task's node records) and `GET /api/tasks/<id>/node?path=…` (one node's). */
async function nodeRecords(res: ServerResponse, nodes: ReturnType<typeof nodeApi>, taskId: TaskId, which: string, url: URL): Promise<void> {
  if (which === "nodes") {
    const answer = await nodes.list(taskId);
    return json(res, answer.status, answer.body);
  }
  const path = url.searchParams.get("path");
  const occurrence = url.searchParams.get("occurrence");
  if (!path) return json(res, 400, { error: "path is required: /api/tasks/<id>/node?path=0.steps.1" });
  if (occurrence !== null && !/^[1-9]\d{0,8}$/.test(occurrence))
    return json(res, 400, { error: `occurrence '${occurrence}' is not a positive integer` });
  const answer = await nodes.get(taskId, path, occurrence === null ? undefined : Number(occurrence));
  return json(res, answer.status, answer.body);
}

/** Starts the inspector server: subscribes to the cluster and listens on `host:port`. */
export async function startInspectServer(options: InspectServerOptions): Promise<InspectServer> {
  // Validated before anything starts, so a bad name fails the start rather than every request.
  allowedHosts(options.host ?? "127.0.0.1", 1, options.allowedHosts);
  const state = new InspectState();
  const assets = options.assetsDir ?? packagedAssetsDir();
  /** The charts as `/api/machines` answers them, read (or laid out) when a page first asks. */
  let charts: Promise<string> | undefined;
  const chartsJson = () => (charts ??= machineCharts().then((list) => JSON.stringify(list)));
  const nodes = nodeApi(options.bus, options.subjects);
  const stored = storedTasks(state, options);
  await stored.recent();
  const subscriptions = followCluster(state, options);
  await options.bus.flush();
  const stream = changeStream(state, options);

  let hosts: ReadonlySet<string> = new Set();
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refused = refusal(req, hosts);
    if (refused) {
      res.writeHead(refused.status, { "content-type": "text/plain; charset=utf-8", ...SECURITY_HEADERS });
      res.end(`${refused.reason}\n`);
      return;
    }
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const rerunMatch = /^\/api\/tasks\/([^/]+)\/rerun$/.exec(url.pathname);
    if (rerunMatch && req.method === "POST") {
      const taskId = pathTaskId(res, rerunMatch[1]);
      return taskId === undefined ? undefined : rerun(req, res, nodes, taskId);
    }
    if (req.method !== "GET") return json(res, 405, { error: "only GET, and POST to /api/tasks/<id>/rerun" });
    const asset = ASSETS[url.pathname];
    if (asset) {
      const body = await readFile(join(assets, asset));
      res.writeHead(200, { "content-type": TYPES[asset.split(".").pop() ?? ""] ?? "application/octet-stream", ...SECURITY_HEADERS });
      res.end(body);
      return;
    }
    if (url.pathname === "/api/machines") return json(res, 200, await chartsJson());
    if (url.pathname === "/api/state") {
      const q = url.searchParams;
      const view = filterView(state.view(), {
        task: q.get("task") ?? undefined,
        role: q.get("role") ?? undefined,
        process: q.get("process") ?? undefined,
      });
      const replayError = stored.error();
      return json(res, 200, replayError === undefined ? view : { ...view, replayError });
    }
    const nodesMatch = /^\/api\/tasks\/([^/]+)\/(nodes|node)$/.exec(url.pathname);
    if (nodesMatch) {
      const taskId = pathTaskId(res, nodesMatch[1]);
      return taskId === undefined ? undefined : nodeRecords(res, nodes, taskId, nodesMatch[2] ?? "", url);
    }
    const taskMatch = /^\/api\/tasks\/([^/]+)$/.exec(url.pathname);
    if (taskMatch) {
      const taskId = pathTaskId(res, taskMatch[1]);
      if (taskId === undefined) return;
      await stored.task(taskId);
      const task = state.task(taskId);
      if (task) return json(res, 200, task);
      const replayError = stored.error();
      return replayError !== undefined
        ? json(res, 502, { error: replayError })
        : json(res, 404, { error: `no task '${taskId}' live or in the events stream` });
    }
    if (url.pathname === "/api/stream") return stream.open(req, res);
    json(res, 404, { error: "not found" });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { error: messageOf(err) });
      else res.end();
    });
  });
  const address = options.host ?? "127.0.0.1";
  const listening = await listenGuarded(server, options.port, address, options.allowedHosts);
  const port = listening.port;
  hosts = listening.hosts;
  const close = async () => {
    stream.close();
    await Promise.all(subscriptions.map((s) => s.unsubscribe()));
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return { url: `${listening.base}/`, port, state, close, [Symbol.asyncDispose]: close };
}
