/**
 * `dirigent inspect --stately`: forwards the cluster's inspection messages, turned into Stately's inspection events by
 * `@statelyai/inspect`'s `createInspector`, to the Stately inspector. Its own bridge server (not
 * `@statelyai/inspect/server`, which listens on every interface, accepts WebSocket clients from any origin and
 * rebroadcasts what one client sends to all others) serves a page framing the hosted Stately inspector and pushes the
 * events to that page over a WebSocket. It listens on 127.0.0.1 unless told otherwise, answers only its own host
 * names, accepts WebSocket upgrades only from allowed origins, and never relays what a viewer sends.
 * Machine actors are announced with their definition from machines/, so Stately can draw them.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { createInspector, type StatelyInspectionEvent } from "@statelyai/inspect";
import type { AnyStateMachine } from "xstate";
import type { InspectMessage } from "../../protocol/inspect.js";
import { allowedHosts, hostLiteral, isLoopbackOrigin, isWildcard, refusal, SECURITY_HEADERS, type Refusal } from "./guard.js";
import { packagedAssetsDir } from "./server.js";
import { machines } from "../charts/registry.js";

/** Options of {@link startStatelyBridge}. */
export interface StatelyBridgeOptions {
  /** Port of the bridge page and its WebSocket (Stately's default 8080); 0 picks a free one. */
  port: number;
  /** Interface to listen on; `127.0.0.1` by default. */
  host?: string;
  /** More `Host` header values answered (`NAME` or `NAME:PORT`), as for the inspector page's server. */
  allowedHosts?: readonly string[];
  /** The Stately inspector the page frames; default `https://stately.ai/inspect`. Its origin may open the WebSocket. */
  url?: string;
  /** How many recent events a viewer that connects later receives first. Default 1000. */
  recent?: number;
}

/** A running bridge. */
export interface StatelyBridge {
  /** The bridge page to open in a browser. */
  readonly pageUrl: string;
  /** Where the bridge listens. */
  readonly address: AddressInfo;
  /** Forwards one inspection message to every viewer. */
  forward(message: InspectMessage): void;
  stop(): Promise<void>;
}

/** The parts of the `ws` package used here (it has no types installed). */
interface Ws {
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string): void;
  terminate(): void;
  on(event: "close", listener: () => void): void;
  on(event: "error", listener: (err: Error) => void): void;
}
interface WsServer {
  handleUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, done: (ws: Ws) => void): void;
  close(): void;
}
type WsModule = { WebSocketServer: new (options: { noServer: true; maxPayload: number }) => WsServer };
// `ws` is a dependency of @statelyai/inspect, so it is resolved from there rather than declared again.
const requireHere = createRequire(import.meta.url);
const ws = createRequire(requireHere.resolve("@statelyai/inspect/server"))("ws") as WsModule;
const OPEN = 1;
/** A viewer this far behind is dropped rather than buffered without end. */
const MAX_BUFFERED = 16 * 1024 * 1024;

interface StatelyRef {
  sessionId: string;
  id: string;
  logic?: { config: unknown };
  _parent?: StatelyRef;
  send(): void;
  getSnapshot(): unknown;
  subscribe(): { unsubscribe(): void };
}

const escapeAttr = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const STYLE = "*{margin:0;padding:0}html,body{height:100%}iframe{width:100%;height:100%;border:none}";
const STYLE_HASH = `'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`;

function bridgePage(inspectorUrl: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Stately Inspector (dirigent bridge)</title>
<style>${STYLE}</style>
</head>
<body>
<iframe id="inspector" data-src="${escapeAttr(inspectorUrl)}"></iframe>
<script type="module" src="/bridge.js"></script>
</body>
</html>
`;
}

/** Starts the bridge server; resolves once it listens. */
export async function startStatelyBridge(options: StatelyBridgeOptions): Promise<StatelyBridge> {
  const inspectorUrl = options.url ?? "https://stately.ai/inspect";
  const statelyOrigin = new URL(inspectorUrl).origin;
  const address = options.host ?? "127.0.0.1";
  allowedHosts(address, 1, options.allowedHosts);
  const script = await readFile(join(packagedAssetsDir(), "stately-bridge.js"));
  const page = bridgePage(inspectorUrl);
  const recent: string[] = [];
  const maxRecent = options.recent ?? 1000;
  const viewers = new Set<Ws>();
  let hosts: ReadonlySet<string> = new Set();
  const originAllowed = (origin: string) => origin === statelyOrigin.toLowerCase() || isLoopbackOrigin(origin);

  /** The page may open a WebSocket to the host it was loaded from; `host` is a checked one, or absent on a refusal. */
  const headers = (host: string | undefined) => ({
    ...SECURITY_HEADERS,
    "content-security-policy": `default-src 'none'; script-src 'self'; style-src ${STYLE_HASH}; frame-src ${statelyOrigin}; connect-src ${host ? `'self' ws://${host}` : "'none'"}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
  });
  const answer = (req: IncomingMessage, res: ServerResponse, status: number, type: string, body: string | Buffer) => {
    res.writeHead(status, { "content-type": `${type}; charset=utf-8`, ...headers(req.headers.host) });
    res.end(body);
  };
  const server = createServer((req, res) => {
    const refused = refusal(req, hosts, originAllowed);
    if (refused) {
      res.writeHead(refused.status, { "content-type": "text/plain; charset=utf-8", ...headers(undefined) });
      res.end(`${refused.reason}\n`);
      return;
    }
    if (req.method !== "GET") return answer(req, res, 405, "text/plain", "only GET\n");
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    if (path === "/") return answer(req, res, 200, "text/html", page);
    if (path === "/bridge.js") return answer(req, res, 200, "text/javascript", script);
    answer(req, res, 404, "text/plain", "not found\n");
  });
  const wss = new ws.WebSocketServer({ noServer: true, maxPayload: 4096 });
  const refuseUpgrade = (socket: Socket, { status, reason }: Refusal) => {
    const text = status === 421 ? "Misdirected Request" : "Forbidden";
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(reason) + 1}\r\n\r\n${reason}\n`,
    );
  };
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    const refused = refusal(req, hosts, originAllowed);
    if (refused) return refuseUpgrade(socket, refused);
    wss.handleUpgrade(req, socket, head, (viewer) => {
      // What a viewer sends is read and dropped: a viewer only receives.
      viewers.add(viewer);
      viewer.on("close", () => viewers.delete(viewer));
      viewer.on("error", () => viewers.delete(viewer));
      for (const frame of recent) viewer.send(frame);
    });
  });

  const broadcast = (event: StatelyInspectionEvent) => {
    const frame = JSON.stringify(event);
    recent.push(frame);
    if (recent.length > maxRecent) recent.shift();
    for (const viewer of viewers) {
      if (viewer.bufferedAmount > MAX_BUFFERED) {
        viewers.delete(viewer);
        viewer.terminate();
      } else if (viewer.readyState === OPEN) viewer.send(frame);
    }
  };
  const inspector = createInspector({ send: broadcast });

  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(options.port, address, () => resolveListen());
  });
  const bound = server.address() as AddressInfo;
  hosts = allowedHosts(address, bound.port, options.allowedHosts);

  const definitions = new Map<string, AnyStateMachine>(machines.map((m) => [m.machine.id, m.machine]));
  const refs = new Map<string, StatelyRef>();
  const refOf = (actorId: string, machine?: string, parentId?: string): StatelyRef => {
    let ref = refs.get(actorId);
    if (!ref) {
      const definition = machine === undefined ? undefined : definitions.get(machine);
      const parent = parentId === undefined ? undefined : refs.get(parentId);
      ref = {
        sessionId: actorId,
        id: actorId,
        ...(definition ? { logic: { config: definition.config } } : {}),
        ...(parent ? { _parent: parent } : {}),
        send: () => undefined,
        getSnapshot: () => undefined,
        subscribe: () => ({ unsubscribe: () => undefined }),
      };
      refs.set(actorId, ref);
    }
    return ref;
  };
  return {
    pageUrl: `http://${isWildcard(address) ? "127.0.0.1" : hostLiteral(address)}:${bound.port}/`,
    address: bound,
    forward(m) {
      switch (m.type) {
        case "inspect.actor":
          inspector.actor(
            refOf(m.actorId, m.isMachine ? m.machine : undefined, m.parentId),
            { ...m.snapshot, status: m.snapshot.status as "active" },
            {
              ...(m.parentId ? { parentId: m.parentId } : {}),
              rootId: m.rootId,
            },
          );
          return;
        case "inspect.event":
          inspector.event(refOf(m.actorId), m.event, m.sourceId ? { source: refOf(m.sourceId) } : {});
          return;
        case "inspect.snapshot":
          inspector.snapshot(refOf(m.actorId), { ...m.snapshot, status: m.snapshot.status as "active" }, { event: { type: m.eventType } });
          if (m.snapshot.status !== "active") refs.delete(m.actorId);
          return;
        default:
          return;
      }
    },
    async stop() {
      for (const viewer of viewers) viewer.terminate();
      viewers.clear();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
