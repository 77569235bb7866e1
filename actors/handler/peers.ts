/**
 * Work goes to a Handler with a free slot. The Handler processes of a deployment share one queue group, where NATS
 * hands each request to a member at random, busy or not. So each Handler reports its free slots on
 * `<root>.handler.load` ({@link HandlerLoad}) when they change (at most every {@link REPORT_AFTER_MS}) and every
 * {@link LOAD_EVERY_MS}, and a request finding every slot taken goes to a peer that reported free ones, on that peer's
 * own subject and with the asker's reply subject, so the peer answers the asker, keepalives included. It goes at once
 * when a peer is known to be free, or else while it waits here, as soon as a peer reports a free slot (work stealing,
 * oldest first). A passed request carries {@link FORWARDED_HEADER}, the Handlers it was passed by: it is never passed
 * on arrival again (no ping-pong between full Handlers), but while it waits for a slot where it lands, a peer that
 * reports a free slot may still take it, up to {@link MAX_PASSES} passes in all and never back to a Handler that
 * passed it. So a burst that several full Handlers passed to one peer before its next report spreads out again.
 * Reports older than {@link STALE_AFTER_MS} are ignored, and a Handler that stops reports no free slot. With one
 * Handler, nothing is ever passed.
 */
import { decode, encode, FORWARDED_HEADER, HandlerLoad } from "../../protocol/index.js";
import type { BusMessage, BusSubscription } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import type { Semaphore, Ticket } from "../limit.js";
import type { Overflow } from "../serve.js";

/** How often a Handler reports its free slots. */
export const LOAD_EVERY_MS = 1000;
/** A change of the free slots is reported this long after it, with any other change meanwhile. */
export const REPORT_AFTER_MS = 20;
/** A peer not heard from for this long is not passed work (it may have stopped). */
export const STALE_AFTER_MS = 3 * LOAD_EVERY_MS;
/** A request is passed between Handlers at most this many times. */
export const MAX_PASSES = 2;

type Kind = "execute" | "script";

/** What this process knows of the other Handlers, and its own reports. */
export class HandlerPeers {
  readonly #deps: ActorDeps;
  readonly #slots: Record<Kind, Semaphore>;
  /** Each peer's free slots as last reported, less what was passed to it since, and when it reported. */
  readonly #peers = new Map<string, { free: Record<Kind, number>; at: number }>();
  /** Requests waiting here for a slot, oldest first, by kind. */
  readonly #waiting: Record<Kind, { msg: BusMessage; ticket: Ticket }[]> = { execute: [], script: [] };
  #subscription: BusSubscription | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #soon: ReturnType<typeof setTimeout> | undefined;

  constructor(
    deps: ActorDeps,
    /** This Handler process ([A-Za-z0-9_-], at most 64 characters). */
    readonly id: string,
    slots: Record<Kind, Semaphore>,
  ) {
    this.#deps = deps;
    this.#slots = slots;
  }

  /** Listens to the peers' reports and starts reporting this Handler's free slots. */
  start(): void {
    const { bus, subjects } = this.#deps;
    this.#subscription = bus.subscribe(subjects.handlerLoad, (msg) => {
      const decoded = decode(HandlerLoad, msg.data);
      if (!decoded.ok || decoded.value.handler === this.id) return;
      const peer = { free: { ...decoded.value.free }, at: this.#now() };
      this.#peers.set(decoded.value.handler, peer);
      this.#steal(decoded.value.handler, peer.free, "execute");
      this.#steal(decoded.value.handler, peer.free, "script");
    });
    for (const kind of ["execute", "script"] as const) this.#slots[kind].onChange = () => this.#reportSoon();
    this.#report();
    this.#timer = setInterval(() => this.#report(), LOAD_EVERY_MS);
    this.#timer.unref?.();
  }

  /** Where requests of `kind` go when every slot of this Handler is taken (`serve`'s `overflow`). */
  overflow(kind: Kind): Overflow {
    return {
      direct: this.#deps.subjects.handlerDirect(this.id, kind),
      pass: (msg) => this.#pass(kind, msg),
      waiting: (msg, ticket) => this.#wait(kind, msg, ticket),
    };
  }

  /** Stops reporting, and tells the peers this Handler takes nothing more. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    clearTimeout(this.#soon);
    for (const kind of ["execute", "script"] as const) this.#slots[kind].onChange = undefined;
    try {
      this.#publish({ execute: 0, script: 0 });
    } catch {
      // The connection is closing: the peers stop passing work here once this Handler's report is stale.
    }
    await this.#subscription?.unsubscribe();
  }

  #pass(kind: Kind, msg: BusMessage): boolean {
    if (!passable(msg) || passedBy(msg).length > 0) return false;
    const peer = this.#freest(kind);
    if (peer === undefined) return false;
    this.#forward(kind, msg, peer.id, peer.free);
    return true;
  }

  #forward(kind: Kind, msg: BusMessage, peer: string, free: Record<Kind, number>): void {
    free[kind]--;
    msg.forward?.(this.#deps.subjects.handlerDirect(peer, kind), { [FORWARDED_HEADER]: [...passedBy(msg), this.id].join(",") });
  }

  /** Keeps `msg` in line for a peer's free slot while it waits for one here. */
  #wait(kind: Kind, msg: BusMessage, ticket: Ticket): () => void {
    if (!passable(msg) || passedBy(msg).length >= MAX_PASSES) return () => undefined;
    const entry = { msg, ticket };
    const line = this.#waiting[kind];
    line.push(entry);
    return () => {
      const at = line.indexOf(entry);
      if (at >= 0) line.splice(at, 1);
    };
  }

  /**
   * Passes the oldest requests waiting here to `peer`, as many as it has free slots, each one `peer` did not pass here
   * (the line holds only requests passed fewer than {@link MAX_PASSES} times).
   */
  #steal(peer: string, free: Record<Kind, number>, kind: Kind): void {
    const line = this.#waiting[kind];
    for (let i = 0; free[kind] > 0 && i < line.length; ) {
      const entry = line[i];
      if (entry === undefined) break;
      if (passedBy(entry.msg).includes(peer)) {
        i++;
        continue;
      }
      line.splice(i, 1);
      // Granted a slot here meanwhile: it runs here.
      if (entry.ticket.cancel()) this.#forward(kind, entry.msg, peer, free);
    }
  }

  /** The peer with the most free slots of `kind` in a fresh report. */
  #freest(kind: Kind): { id: string; free: Record<Kind, number> } | undefined {
    const now = this.#now();
    let best: { id: string; free: Record<Kind, number> } | undefined;
    for (const [id, peer] of this.#peers) {
      if (now - peer.at > STALE_AFTER_MS) continue;
      if (peer.free[kind] > 0 && (best === undefined || peer.free[kind] > best.free[kind])) best = { id, free: peer.free };
    }
    return best;
  }

  #reportSoon(): void {
    // Alone, nobody reads the changes: the report every second is enough for a peer that starts to find this one.
    if (this.#soon !== undefined || this.#peers.size === 0) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      this.#report();
    }, REPORT_AFTER_MS);
    this.#soon.unref?.();
  }

  #report(): void {
    // Peers that stopped reporting (gone without their last report) are forgotten.
    const now = this.#now();
    for (const [id, peer] of this.#peers) if (now - peer.at > STALE_AFTER_MS) this.#peers.delete(id);
    this.#publish({ execute: this.#slots.execute.free, script: this.#slots.script.free });
  }

  #publish(free: Record<Kind, number>): void {
    this.#deps.bus.publish(this.#deps.subjects.handlerLoad, encode(HandlerLoad, { type: "handler.load", handler: this.id, free }));
  }

  #now(): number {
    return this.#deps.now().getTime();
  }
}

/** A request over NATS that wants an answer. */
function passable(msg: BusMessage): boolean {
  return msg.forward !== undefined && msg.expectsReply;
}

/** The Handlers that passed `msg` on so far, first first ({@link FORWARDED_HEADER}). */
function passedBy(msg: BusMessage): string[] {
  const value = msg.headers?.get(FORWARDED_HEADER);
  return value ? value.split(",").filter((id) => id !== "") : [];
}
