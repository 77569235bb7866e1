/**
 * Workload 14 of `npm run bench`: what a dirigent process holds in memory once it has worked, as a deployment sizes
 * it (docs/deploy.md, section 8). `dirigent up`, then each role in a process of its own (`dirigent worker --role …`),
 * on the bench's nats-server with the user-level model server; 100 one-call tasks submitted at once and run to their
 * results; then each process's resident memory (VmRSS, /proc/<pid>/status). Fresh processes each repeat.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, bench, describe } from "vitest";
import { createSubjects } from "../../../protocol/index.js";
import { CLI } from "../../support/processes.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../../support/nats-server.js";
import { startSubmitter } from "../pipeline.js";
import { figureOf, once, record, rssOf, WHOLE } from "../results.js";
import { startModelServer, type ModelServer } from "./model.js";
import { startNode, type Child } from "./processes.js";

const REPEATS = 3;
/** Tasks run before the memory is read. */
const TASKS = 100;
const WORKLOAD = `14 footprint (resident memory after ${TASKS} one-call tasks at once, model over HTTP)`;

let nats: TestNatsServer;
let model: ModelServer;

beforeAll(async () => {
  nats = await startTestNatsServer();
  model = await startModelServer();
});

afterAll(async () => {
  await model?.stop();
  await nats?.stop();
});

/** The resident memory of process `pid`, MB. */
function residentMb(pid: number): number {
  const bytes = rssOf(pid);
  if (bytes === undefined) throw new Error(`no resident memory for process ${pid}`);
  return bytes / 1024 / 1024;
}

/**
 * Starts the CLI as each of `commands` (its arguments after the NATS and root flags) on one fresh root, runs
 * {@link TASKS} tasks through them, and reads each process's resident memory, MB, by command.
 */
async function footprint(commands: ReadonlyArray<readonly string[]>): Promise<number[]> {
  const root = randomRoot();
  const dataDir = await mkdtemp(join(tmpdir(), "dirigent-bench-footprint-"));
  const children: Child[] = [];
  try {
    for (const command of commands) {
      const { child } = await startNode(
        CLI,
        [...command, "--nats", nats.url, "--prefix", root, "--model", "bench-model"],
        { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "bench", DIRIGENT_DATA_DIR: dataDir },
        /dirigent: ready/,
      );
      children.push(child);
    }
    const submitter = await startSubmitter(nats.url, createSubjects(root));
    try {
      await submitter.throughput(TASKS);
    } finally {
      await submitter.stop();
    }
    return children.map((child) => residentMb(child.pid));
  } finally {
    for (const child of children) await child.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const ROLES = ["director", "evaluator", "handler", "memory"] as const;

describe("footprint: a dirigent process's resident memory", () => {
  bench(
    "14 footprint",
    once(async () => {
      const up: number[] = [];
      const roles: Record<(typeof ROLES)[number], number[]> = { director: [], evaluator: [], handler: [], memory: [] };
      for (let i = 0; i < REPEATS; i++) {
        up.push(...(await footprint([["up"]])));
        const each = await footprint(ROLES.map((role) => ["worker", "--role", role]));
        ROLES.forEach((role, j) => roles[role].push(each[j] ?? Number.NaN));
      }
      record({ order: 14.1, workload: WORKLOAD, variant: "`dirigent up` (every role in one process)", unit: "MB", figure: figureOf(up) });
      ROLES.forEach((role, j) =>
        record({
          order: 14.2 + j / 100,
          workload: WORKLOAD,
          variant: `\`dirigent worker --role ${role}\` (the four roles in four processes)`,
          unit: "MB",
          figure: figureOf(roles[role]),
        }),
      );
    }),
    WHOLE,
  );
});
