/**
 * Work goes to a Handler with a free slot. The Handler processes of a deployment share one queue group, where NATS
 * hands each request to a member at random, busy or not. So each Handler reports its free slots on
 * `<root>.handler.load` every second ({@link HandlerLoad}), and one whose slots are all taken passes a request it
 * receives to the peer that reported the most free ones, on that peer's own subject and with the asker's reply
 * subject: the peer answers the asker, keepalives included. A passed request carries {@link FORWARDED_HEADER} and is
 * never passed again; it waits for a slot where it lands. Reports older than {@link STALE_AFTER_MS} are ignored, and a
 * Handler that stops reports no free slot. With one Handler, nothing is ever passed.
 */
import { decode, encode, FORWARDED_HEADER, HandlerLoad } from "../../protocol/index.js";
import type { BusMessage, BusSubscription } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import type { Semaphore } from "../limit.js";
import type { Overflow } from "../serve.js";

/** How often a Handler reports its free slots. */
export const LOAD_EVERY_MS = 1000;
/** A peer not heard from for this long is not passed work (it may have stopped). */
export const STALE_AFTER_MS = 3 * LOAD_EVERY_MS;

type Kind = "execute" | "script";

/** What this process knows of the other Handlers, and its own reports. */
export class HandlerPeers {
  readonly #deps: ActorDeps;
  readonly #slots: Record<Kind, Semaphore>;
  /** Each peer's free slots as last reported, less what was passed to it since, and when it reported. */
  readonly #peers = new Map<string, { free: Record<Kind, number>; at: number }>();
  #subscription: BusSubscription | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;

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
      this.#peers.set(decoded.value.handler, { free: { ...decoded.value.free }, at: this.#now() });
    });
    this.#report();
    this.#timer = setInterval(() => this.#report(), LOAD_EVERY_MS);
    this.#timer.unref?.();
  }

  /** Where requests of `kind` go when every slot of this Handler is taken (`serve`'s `overflow`). */
  overflow(kind: Kind): Overflow {
    return { direct: this.#deps.subjects.handlerDirect(this.id, kind), pass: (msg) => this.#pass(kind, msg) };
  }

  /** Stops reporting, and tells the peers this Handler takes nothing more. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    try {
      this.#publish({ execute: 0, script: 0 });
    } catch {
      // The connection is closing: the peers stop passing work here once this Handler's report is stale.
    }
    await this.#subscription?.unsubscribe();
  }

  #pass(kind: Kind, msg: BusMessage): boolean {
    if (msg.forward === undefined || !msg.expectsReply || msg.headers?.has(FORWARDED_HEADER) === true) return false;
    const peer = this.#freest(kind);
    if (peer === undefined) return false;
    peer.free[kind]--;
    msg.forward(this.#deps.subjects.handlerDirect(peer.id, kind), { [FORWARDED_HEADER]: this.id });
    return true;
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
