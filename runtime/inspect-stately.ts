/**
 * `dirigent inspect --stately`: forwards the cluster's inspection messages through `@statelyai/inspect`. Its local
 * bridge server (a page framing the Stately inspector, which needs the internet) relays them over a WebSocket.
 * Machine actors are announced with their definition from machines/, so Stately can draw them.
 */
import { createWebSocketInspector } from "@statelyai/inspect";
import { createInspectorServer } from "@statelyai/inspect/server";
import type { AnyStateMachine } from "xstate";
import type { InspectMessage } from "../protocol/inspect.js";
import { machines } from "./machines.js";

/** Options of {@link startStatelyBridge}. */
export interface StatelyBridgeOptions {
  /** Port of the bridge page and its WebSocket (Stately's default 8080). */
  port: number;
  /** The Stately inspector the page frames; default `https://stately.ai/inspect`. */
  url?: string;
}

/** A running bridge. */
export interface StatelyBridge {
  /** The bridge page to open in a browser. */
  readonly pageUrl: string;
  /** Forwards one inspection message. */
  forward(message: InspectMessage): void;
  stop(): void;
}

interface StatelyRef {
  sessionId: string;
  id: string;
  logic?: { config: unknown };
  _parent?: StatelyRef;
  send(): void;
  getSnapshot(): unknown;
  subscribe(): { unsubscribe(): void };
}

/** Starts the bridge server and a WebSocket inspector connected to it. */
export function startStatelyBridge(options: StatelyBridgeOptions): StatelyBridge {
  const server = createInspectorServer({ port: options.port, autoOpen: false, ...(options.url ? { url: options.url } : {}) });
  const inspector = createWebSocketInspector({ url: `ws://127.0.0.1:${options.port}`, maxDeferredEvents: 1000 });
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
    pageUrl: `http://127.0.0.1:${options.port}/`,
    forward(m) {
      switch (m.type) {
        case "inspect.actor":
          inspector.actor(refOf(m.actorId, m.isMachine ? m.machine : undefined, m.parentId), { ...m.snapshot, status: m.snapshot.status as "active" }, {
            ...(m.parentId ? { parentId: m.parentId } : {}),
            rootId: m.rootId,
          });
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
    stop() {
      inspector.stop();
      server.stop();
    },
  };
}
