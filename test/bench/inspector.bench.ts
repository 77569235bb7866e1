/**
 * Inspector benchmark (not part of `npm test`; `npm run bench`): 1,000 live actors in one process publish through
 * a real nats-server to `dirigent inspect`'s server, shown by the page in headless Chromium. Measures the update
 * lag from an actor's transition to the page having applied it (target ≤ 500 ms), for a burst of all 1,000 actors
 * and for a steady 500 transitions per second, and the page's memory. Also a vitest bench of one round trip.
 */
import { existsSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, bench, describe } from "vitest";
import { createActor, setup, type Actor, type AnyStateMachine } from "xstate";
import { inspectOption } from "../../actors/inspect-option.js";
import { createSubjects } from "../../protocol/index.js";
import { createInspectPublisher, type InspectPublisher } from "../../runtime/inspect/publisher.js";
import { startInspectServer, type InspectServer } from "../../runtime/inspect/server.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { figureOf, fmt, percentile, record } from "./results.js";
import { tid } from "../support/ids.js";

const ACTORS = 1000;
const BURSTS = 5;

/** The little of the page's globals the functions run in the browser use (the tests compile without lib.dom). */
interface Row {
  getAttribute(name: string): string | null;
}
interface PageGlobals {
  document: { querySelector(selector: string): Row | null; querySelectorAll(selector: string): ArrayLike<Row> };
  __inspector: { lags: number[] };
}
const CHROMIUM = "/usr/bin/chromium";

const toggle = setup({
  types: { context: {} as { n: number; taskId: string }, input: {} as { taskId: string }, events: {} as { type: "flip" } },
}).createMachine({
  id: "toggle",
  context: ({ input }) => ({ n: 0, taskId: input.taskId }),
  initial: "off",
  states: { off: { on: { flip: "on" } }, on: { on: { flip: "off" } } },
});

let nats: TestNatsServer;
let server: InspectServer;
let browser: Browser;
let page: Page;
let publisher: InspectPublisher;
let buses: NatsBus[] = [];
const actors: Array<Actor<AnyStateMachine>> = [];

async function lags(): Promise<number[]> {
  return page.evaluate(() => (globalThis as unknown as PageGlobals).__inspector.lags.splice(0));
}

function report(label: string, values: number[]): void {
  console.log(
    `${label}: ${values.length} updates, lag p50 ${percentile(values, 50)} ms, p95 ${percentile(values, 95)} ms, max ${percentile(values, 100)} ms`,
  );
}

/** The id the publisher gives the i-th actor: each root actor is its own actor system, numbered from 1 here. */
const actorIdOf = (i: number) => `bench:1/${i + 1}/${actors[i]?.sessionId ?? "?"}`;

/** Waits until the page shows every actor in the state it is in now. */
async function pageCaughtUp(): Promise<void> {
  const expected = Object.fromEntries(actors.map((a, i) => [actorIdOf(i), String(a.getSnapshot().value)]));
  await page
    .waitForFunction(
      (want) =>
        Object.entries(want).every(
          ([id, state]) =>
            (globalThis as unknown as PageGlobals).document.querySelector(`.actor[data-actor-id="${id}"]`)?.getAttribute("data-state") ===
            state,
        ),
      expected,
      { timeout: 60_000, polling: 50 },
    )
    .catch(async (err: unknown) => {
      const rows = await page.evaluate(() =>
        Array.from((globalThis as unknown as PageGlobals).document.querySelectorAll(".actor"))
          .slice(0, 3)
          .map((r) => `${r.getAttribute("data-actor-id")}=${r.getAttribute("data-state")}`),
      );
      const count = await page.evaluate(() => (globalThis as unknown as PageGlobals).document.querySelectorAll(".actor").length);
      throw new Error(`page did not catch up: ${count} actor rows, e.g. ${rows.join(", ")}`, { cause: err });
    });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing (apt-get install -y chromium)`);
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  nats = await startTestNatsServer();
  const subjects = createSubjects(randomRoot());
  const serverBus = new NatsBus(await connectNats({ servers: nats.url, name: "bench-inspector" }), { onError: () => undefined });
  const actorBus = new NatsBus(await connectNats({ servers: nats.url, name: "bench-actors" }), { onError: () => undefined });
  buses = [serverBus, actorBus];
  server = await startInspectServer({ bus: serverBus, subjects, port: 0 });
  publisher = createInspectPublisher({ bus: actorBus, subjects, maxPerSec: 50_000, process: "bench:1" });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  page = await browser.newPage();
  await page.goto(server.url);
  await page.waitForSelector("body[data-ready=true]");
  const start = performance.now();
  for (let i = 0; i < ACTORS; i++) {
    const taskId = tid(`bench-${Math.floor(i / 10)}`);
    actors.push(
      createActor(toggle, {
        ...inspectOption({ inspect: publisher.hook }, "handler", taskId),
        input: { taskId },
      }).start() as unknown as Actor<AnyStateMachine>,
    );
  }
  await pageCaughtUp();
  console.log(`${ACTORS} actors created and shown in ${(performance.now() - start).toFixed(0)} ms`);
  await lags();

  // A burst: every actor transitions at once.
  const plain = Array.from({ length: ACTORS }, () => createActor(toggle, { input: { taskId: "plain" } }).start());
  let sendStart = performance.now();
  for (const a of plain) a.send({ type: "flip" });
  console.log(`sending ${ACTORS} events with inspection off took ${(performance.now() - sendStart).toFixed(0)} ms`);
  for (const a of plain) a.stop();
  // Bursts: every actor transitions at once, five times.
  const burstP50: number[] = [];
  const burstP95: number[] = [];
  for (let round = 0; round < BURSTS; round++) {
    sendStart = performance.now();
    for (const a of actors) a.send({ type: "flip" });
    console.log(`sending ${ACTORS} events with inspection on took ${(performance.now() - sendStart).toFixed(0)} ms`);
    await pageCaughtUp();
    const burst = await lags();
    report(`burst of ${ACTORS} transitions`, burst);
    report(
      "  of which actor → inspector server",
      server.state.view().actors.map((a) => a.receivedAt - a.updatedAt),
    );
    burstP50.push(percentile(burst, 50));
    burstP95.push(percentile(burst, 95));
  }
  const p95 = figureOf(burstP95);
  record({
    order: 7.1,
    workload: "7 inspector lag",
    variant: `burst: all ${ACTORS} live actors transition at once, p95 lag to the page`,
    unit: "ms",
    figure: p95,
    target: "≤ 500 ms",
    met: p95.median <= 500,
    note: `p50 ${fmt(figureOf(burstP50).median)} ms`,
  });

  // Steady: 500 transitions per second for 4 seconds.
  const perTick = 25;
  let next = 0;
  for (let tick = 0; tick < 80; tick++) {
    for (let k = 0; k < perTick; k++) actors[next++ % ACTORS]?.send({ type: "flip" });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await pageCaughtUp();
  const steady = await lags();
  report("steady 500 transitions/s", steady);
  const sorted = [...steady].sort((x, y) => x - y);
  const steadyP95 = percentile(sorted, 95);
  record({
    order: 7.2,
    workload: "7 inspector lag",
    variant: `steady 500 transitions/s over ${ACTORS} live actors, p95 lag`,
    unit: "ms",
    figure: figureOf([steadyP95]),
    target: "≤ 500 ms",
    met: steadyP95 <= 500,
    note: `p50 ${fmt(percentile(sorted, 50))} ms, max ${fmt(percentile(sorted, 100))} ms`,
  });

  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const { metrics } = (await cdp.send("Performance.getMetrics")) as { metrics: Array<{ name: string; value: number }> };
  const metric = (name: string) => metrics.find((m) => m.name === name)?.value ?? Number.NaN;
  record({
    order: 7.3,
    workload: "7 inspector lag",
    variant: `page memory with ${ACTORS} live actors (JS heap used)`,
    unit: "MiB",
    figure: figureOf([metric("JSHeapUsedSize") / 2 ** 20]),
    note: `${metric("Nodes")} DOM nodes`,
  });
  console.log(
    `page: JS heap ${(metric("JSHeapUsedSize") / 2 ** 20).toFixed(1)} MiB used of ${(metric("JSHeapTotalSize") / 2 ** 20).toFixed(1)} MiB, ${metric("Nodes")} DOM nodes; inspector server RSS ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB (bench process)`,
  );
  console.log(`publisher: ${JSON.stringify(publisher.stats())}`);
}, 180_000);

afterAll(async () => {
  for (const a of actors) a.stop();
  await browser?.close();
  await server?.close();
  for (const b of buses) await b.close();
  await nats?.stop();
});

describe(`inspector with ${ACTORS} live actors`, () => {
  let i = 0;
  bench(
    "one transition: actor → NATS → server → SSE → page",
    async () => {
      const index = i++ % ACTORS;
      const actor = actors[index];
      if (!actor) return;
      actor.send({ type: "flip" });
      const value = String(actor.getSnapshot().value);
      await page
        .waitForFunction(
          ([id, state]) =>
            (globalThis as unknown as PageGlobals).document.querySelector(`.actor[data-actor-id="${id}"]`)?.getAttribute("data-state") ===
            state,
          [actorIdOf(index), value] as const,
          { timeout: 10_000, polling: "raf" },
        )
        .catch((err: unknown) => {
          console.error(`round trip failed: ${String(err)}`);
          throw err;
        });
    },
    { iterations: 50, time: 0 },
  );
});
