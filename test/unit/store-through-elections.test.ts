/**
 * How a write to a replicated stream is asked again through a leader election (runtime/nats/replicas.ts): what it
 * asks of the stream API between attempts. The wire and the API are stand-ins that answer as nats-server does; the
 * election itself runs against real servers in test/e2e/cluster.test.ts.
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { RequestTimeoutError } from "../../actors/bus.js";
import { storeThroughElections, StreamMissingError } from "../../runtime/nats/replicas.js";
import { StoreError, type NatsWire, type StoredAck } from "../../runtime/nats/wire.js";

const message = { subject: "r.tasks.t1.events", data: new Uint8Array([1]), id: "m1" };

/** A wire whose writes fail with `failures`, one per attempt, then are stored; `attempts` counts them. */
function wireFailing(...failures: Error[]) {
  return wireAnswering({ stream: "R_EVENTS", seq: 1, duplicate: false }, ...failures);
}

/** {@link wireFailing}, the write that is stored at last answered `ack`. */
function wireAnswering(ack: StoredAck, ...failures: Error[]) {
  let attempts = 0;
  const wire = {
    store: async () => {
      const failure = failures[attempts++];
      if (failure) throw failure;
      return ack;
    },
  } as unknown as NatsWire;
  return { wire, attempts: () => attempts };
}

/** The stream API, answering a stream lookup with `info`; `lookups` counts them. */
function api(info: () => Promise<unknown>) {
  let lookups = 0;
  const jsm = async () => ({ streams: { info: () => (lookups++, info()) } }) as unknown as JetStreamManager;
  return { jsm, lookups: () => lookups };
}

/** A write that no answer came for within its timeout (a stream electing its leader got it). */
const unanswered = () => new RequestTimeoutError("no answer on 'r.tasks.t1.events' within 5000 ms", message.subject);
/** A write no stream took (none captures its subject, or none has a leader just then). */
const noResponder = () => new StoreError("no stream stores 'r.tasks.t1.events'", message.subject, 0, 503);
/** The stream API's answer to a lookup of the stream. */
const streamExists = async () => ({ config: { name: "R_EVENTS" } });
/** The stream API's answer to a lookup of a stream that does not exist. */
const noStream = async () => {
  throw new JetStreamApiError({ code: 404, err_code: JetStreamApiCodes.StreamNotFound, description: "stream not found" });
};

describe("a write stored through leader elections", () => {
  it("asks an unanswered write again at once, without a stream lookup that would wait as long again", async () => {
    const { wire, attempts } = wireFailing(unanswered());
    const { jsm, lookups } = api(streamExists);
    await storeThroughElections(jsm, wire, "R_EVENTS", message);
    expect(attempts()).toBe(2);
    expect(lookups()).toBe(0);
  });

  it("looks the stream up after a write nothing answered for, and stops when there is no stream", async () => {
    const { wire, attempts } = wireFailing(noResponder());
    const { jsm, lookups } = api(noStream);
    await expect(storeThroughElections(jsm, wire, "R_EVENTS", message)).rejects.toBeInstanceOf(StreamMissingError);
    expect(attempts()).toBe(1);
    expect(lookups()).toBe(1);
  });

  it("looks the stream up at the first write nothing answered for, after unanswered ones too", async () => {
    const { wire, attempts } = wireFailing(unanswered(), noResponder());
    const { jsm, lookups } = api(noStream);
    await expect(storeThroughElections(jsm, wire, "R_EVENTS", message)).rejects.toBeInstanceOf(StreamMissingError);
    expect([attempts(), lookups()]).toEqual([2, 1]);
  });

  it("asks again after a write nothing answered for while the stream exists (it is electing its leader)", async () => {
    const { wire, attempts } = wireFailing(noResponder(), noResponder());
    const { jsm, lookups } = api(streamExists);
    const stored = await storeThroughElections(jsm, wire, "R_EVENTS", message);
    expect(attempts()).toBe(3);
    expect(lookups()).toBe(1);
    expect(stored).toEqual({ ack: { stream: "R_EVENTS", seq: 1, duplicate: false }, attempts: 3 });
  });

  it("says when the write asked again was one the stream held already (a duplicate of its message id)", async () => {
    const { wire } = wireAnswering({ stream: "R_EVENTS", seq: 7, duplicate: true }, unanswered());
    const { jsm } = api(streamExists);
    expect(await storeThroughElections(jsm, wire, "R_EVENTS", message)).toEqual({
      ack: { stream: "R_EVENTS", seq: 7, duplicate: true },
      attempts: 2,
    });
  });

  it("does not ask again for a write the stream refused", async () => {
    const { wire, attempts } = wireFailing(new StoreError("maximum payload exceeded", message.subject, 10054, 400));
    const { jsm, lookups } = api(streamExists);
    await expect(storeThroughElections(jsm, wire, "R_EVENTS", message)).rejects.toBeInstanceOf(StoreError);
    expect([attempts(), lookups()]).toEqual([1, 0]);
  });
});
