/**
 * A node's record is sent as the node ends and the walk goes on preparing its next step, but nothing of the walk goes
 * out before the record is stored: its calls and events wait behind it, `node.finished` follows the stored record,
 * and the task's root answers once every record is stored (actors/evaluator/node-records.ts).
 */
import { describe, expect, it } from "vitest";
import { nodeRecorder, nodeKey } from "../../actors/evaluator/node-records.js";
import { silentLogger } from "../../actors/deps.js";
import { parseTemplate } from "../../machines/language/parse.js";
import type { TaskNode } from "../../machines/language/ast.js";
import { MemoryTaskStore } from "../../runtime/in-process/store.js";
import type { TaskResult } from "../../protocol/index.js";
import { tid } from "../support/ids.js";

function task(xml: string): TaskNode {
  const parsed = parseTemplate(xml);
  if (!parsed.ok || parsed.document.entry?.kind !== "task") throw new Error("not a task");
  return parsed.document.entry;
}

const root = task(
  "<task type='sequential'><steps><task><description>first</description></task><task><description>second</description></task></steps></task>",
);
const [first, second] = root.steps ?? [];
const done = (content: string): TaskResult => ({ status: "COMPLETE", content, notes: {} });

/** A store whose writes land only when released, in the order they were sent. */
class HeldStore extends MemoryTaskStore {
  readonly held: Array<() => void> = [];
  constructor(private readonly log: string[]) {
    super();
  }
  override async put(key: string, value: Uint8Array): Promise<void> {
    await new Promise<void>((resolve) => this.held.push(resolve));
    await super.put(key, value);
    this.log.push(`stored ${key.slice(key.lastIndexOf(".") + 1, key.lastIndexOf(".") + 7)}`);
  }
  /** Lets every write sent so far land. */
  release(): void {
    for (const land of this.held.splice(0)) land();
  }
}

/** Resolves once `predicate` holds, checked after each turn of the event loop. */
async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((resolve) => setImmediate(resolve));
}

describe("node records and the walk's effects", () => {
  it("holds the walk's next call and events until the record before them is stored; the root waits for all", async () => {
    if (!first || !second) throw new Error("no steps");
    const log: string[] = [];
    const store = new HeldStore(log);
    const short = (key: string) => key.slice(key.lastIndexOf(".") + 1, key.lastIndexOf(".") + 7);
    const keyOf = (path: string) => short(nodeKey(tid("t1"), path, 1));
    const records = nodeRecorder({
      taskId: tid("t1"),
      store,
      log: silentLogger,
      now: () => new Date(0),
      mask: (text) => text,
      progress: (event, _message, data) => log.push(`${event} ${String(data["nodePath"])}`),
    });
    const walk = records.gate({
      progress: (event: string, _message: string, data?: Record<string, unknown>) => log.push(`${event} ${String(data?.["nodePath"])}`),
      execute: async (path: string) => {
        log.push(`execute ${path}`);
        return done(path);
      },
      resume: async () => done(""),
      script: async () => ({ stdout: "", stderr: "", exitCode: 0 }),
      waitForInput: async () => "",
    });

    let secondStarted = false;
    const answered = records.record("0", root, async () => {
      await records.record("0.steps.0", first, async () => ({ result: await walk.execute("0.steps.0") }));
      // The first step's record is on its way, not stored: the walk prepares the second step meanwhile.
      log.push("prepared 0.steps.1");
      walk.progress("step.started", "step 2/2", { nodePath: "0.steps.1" });
      const result = await records.record("0.steps.1", second, async () => {
        secondStarted = true;
        return { result: await walk.execute("0.steps.1") };
      });
      return { result };
    });
    let rootAnswered = false;
    void answered.then(() => (rootAnswered = true));

    await until(() => secondStarted && store.held.length === 1);
    expect(log).toEqual(["execute 0.steps.0", "prepared 0.steps.1"]);
    store.release();
    await until(() => log.includes("execute 0.steps.1") && store.held.length === 2);
    // The second step's record and the root's are both on their way; the root answers only once both are stored.
    expect(rootAnswered).toBe(false);
    store.release();
    expect(await answered).toEqual(done("0.steps.1"));
    expect(log).toEqual([
      "execute 0.steps.0",
      "prepared 0.steps.1",
      `stored ${keyOf("0.steps.0")}`,
      "node.finished 0.steps.0",
      "step.started 0.steps.1",
      "execute 0.steps.1",
      `stored ${keyOf("0.steps.1")}`,
      `stored ${keyOf("0")}`,
      "node.finished 0.steps.1",
      "node.finished 0",
    ]);
  });

  it("calls at once and publishes at once when no record is on its way", async () => {
    const log: string[] = [];
    const records = nodeRecorder({
      taskId: tid("t2"),
      log: silentLogger,
      now: () => new Date(0),
      mask: (text) => text,
      progress: () => undefined,
    });
    const walk = records.gate({
      progress: (event: string, _message: string) => void log.push(event),
      execute: async () => done("x"),
      resume: async () => done(""),
      script: async () => ({ stdout: "", stderr: "", exitCode: 0 }),
      waitForInput: async () => "",
    });
    walk.progress("step.started", "step 1/1");
    expect(log).toEqual(["step.started"]);
  });
});
