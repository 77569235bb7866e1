/**
 * The dirigent side of the user-level bench: `dirigent up` (the built CLI, `node dist/runtime/cli.js up`) as its own
 * process on the bench's nats-server, its Handler calling the bench's model server over HTTP through the `openai` SDK
 * (`OPENAI_BASE_URL`), and a submitter in the bench process that speaks the public wire contract: a request on
 * `<root>.tasks.submit`, answered once the task is stored, and one subscription on `<root>.tasks.*.result` for every
 * result (test/bench/pipeline.ts's {@link startSubmitter}).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSubjects } from "../../../protocol/index.js";
import { CLI } from "../../support/processes.js";
import { randomRoot } from "../../support/nats-server.js";
import { startSubmitter, TRIVIAL_TASK, type Submitter } from "../pipeline.js";
import { startNode, type Child } from "./processes.js";

/** What every contender offers the bench. */
export interface Contender {
  /** The process running the work (its CPU is read from /proc). */
  readonly pid: number;
  /** `count` tasks submitted at once; tasks per second until the last result. */
  throughput(count: number): Promise<number>;
  /** One task submitted, its result awaited; ms. */
  latency(): Promise<number>;
  stop(): Promise<void>;
}

/** A sequential task of `steps` atomic steps, each one model call. */
export function sequentialTask(steps: number): string {
  const step = (i: number) => `    <task><description>Step ${i + 1}: answer with the word ok.</description></task>`;
  return `<task type="sequential">\n  <steps>\n${Array.from({ length: steps }, (_, i) => step(i)).join("\n")}\n  </steps>\n</task>`;
}

/** A contender that also runs the sequential workflow of workload 13. */
export interface Sequential extends Contender {
  /** One sequential task (workflow) submitted, its result awaited; ms. */
  sequentialLatency(): Promise<number>;
}

/** `dirigent up` with its submitters: of the trivial task, and of a {@link sequentialTask} of `steps` steps. */
export type Dirigent = Sequential;

/** Starts `dirigent up --concurrency <concurrency>` on the server at `natsUrl`, the model at `modelUrl`. */
export async function startDirigent(natsUrl: string, modelUrl: string, concurrency: number, steps: number): Promise<Dirigent> {
  const root = randomRoot();
  const dataDir = await mkdtemp(join(tmpdir(), "dirigent-bench-up-"));
  let child: Child | undefined;
  const submitters: Submitter[] = [];
  try {
    ({ child } = await startNode(
      CLI,
      ["up", "--nats", natsUrl, "--prefix", root, "--concurrency", String(concurrency), "--model", "bench-model"],
      { OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: "bench", DIRIGENT_DATA_DIR: dataDir },
      /dirigent: ready/,
    ));
    const subjects = createSubjects(root);
    const trivial = await startSubmitter(natsUrl, subjects, { xml: TRIVIAL_TASK, inputs: {} });
    submitters.push(trivial);
    const sequential = await startSubmitter(natsUrl, subjects, { xml: sequentialTask(steps), inputs: {} });
    submitters.push(sequential);
    const up = child;
    return {
      pid: up.pid,
      throughput: (count) => trivial.throughput(count),
      latency: () => trivial.latency(),
      sequentialLatency: () => sequential.latency(),
      async stop() {
        for (const s of submitters) await s.stop();
        await up.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    for (const s of submitters) await s.stop();
    await child?.stop();
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}
