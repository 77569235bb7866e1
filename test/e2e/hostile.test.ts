/**
 * Hostile input on every subject any client on the bus can reach, against the five roles in five processes (a real
 * nats-server, the mock model over HTTP): thousands of malformed and hostile messages from a seeded PRNG (the seed is
 * printed; HOSTILE_SEED reproduces a run). Every request is answered in time with a structured error, or accepted;
 * no process dies or stops serving; prototype keys in inputs change nothing; a good task still completes.
 */
import { connect, createInbox, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  CancelReply,
  CompileReply,
  ErrorCode,
  ErrorReply,
  EvaluateReply,
  ExecuteReply,
  GoalGetReply,
  GoalListReply,
  GoalReply,
  MatchReply,
  ScriptReply,
  SubmitReply,
  TaskOutcome,
  TaskStatusReply,
  UserInputReply,
} from "../../protocol/index.js";
import { hostileCases, hostileSeed, prng, type HostileCase } from "../support/hostile.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const REQUEST_TIMEOUT_MS = 10_000;
const IN_FLIGHT = 24;
const ROLES = ["director", "evaluator", "handler", "memory", "supervisor"] as const;

let server: TestNatsServer;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-hostile-"));
});

afterAll(async () => {
  // A process stuck in a busy loop does not handle SIGTERM: it is killed after a grace period.
  await Promise.all(
    processes.map(async (p) => {
      const timer = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
      await p.stop();
      clearTimeout(timer);
    }),
  );
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What came back for one request. */
type Answer = { kind: "reply"; text: string } | { kind: "no-responders" } | { kind: "timeout" } | { kind: "refused"; message: string };

/** A request over a plain NATS connection; empty bodies (keepalives) are skipped, NATS's 503 is "no responders". */
async function send(nc: NatsConnection, subject: string, body: Uint8Array, headers?: Record<string, string>): Promise<Answer> {
  const inbox = createInbox();
  const sub = nc.subscribe(inbox);
  const timer = setTimeout(() => sub.unsubscribe(), REQUEST_TIMEOUT_MS);
  try {
    const h = headers === undefined ? undefined : natsHeaders();
    for (const [k, v] of Object.entries(headers ?? {})) h?.set(k, v);
    nc.publish(subject, body, { reply: inbox, ...(h ? { headers: h } : {}) });
  } catch (err) {
    clearTimeout(timer);
    sub.unsubscribe();
    return { kind: "refused", message: String(err) };
  }
  try {
    for await (const m of sub) {
      if (m.headers?.code === 503) return { kind: "no-responders" };
      if (m.data.length > 0) return { kind: "reply", text: m.string() };
    }
    return { kind: "timeout" };
  } finally {
    clearTimeout(timer);
    sub.unsubscribe();
  }
}

/** A subject under attack: a well-formed body to mutate, and the schema of a good answer. */
interface Target {
  name: string;
  subject: string;
  valid: Record<string, unknown>;
  /** A good answer other than an error; `undefined`: only errors are good answers. */
  reply?: z.ZodType;
  count: number;
  /** Nobody answers unless something waits (a task's input): NATS's no-responders is an answer. */
  maybeNobody?: boolean;
  /** Publish only (broadcasts): no answer is expected, the processes must only survive it. */
  publish?: boolean;
}

const TEMPLATE = "<task><description>Say hi about {{topic}}</description></task>";

function targets(root: string): Target[] {
  const s = (rest: string) => `${root}.${rest}`;
  return [
    {
      name: "tasks.submit",
      subject: s("tasks.submit"),
      valid: { taskId: "h-valid", xml: TEMPLATE, inputs: { topic: "cats" } },
      reply: SubmitReply,
      count: 420,
    },
    { name: "tasks.<id>.get", subject: s("tasks.h-none.get"), valid: { any: 1 }, reply: TaskStatusReply, count: 120 },
    { name: "tasks.<id>.cancel", subject: s("tasks.h-none.cancel"), valid: { any: 1 }, reply: CancelReply, count: 120 },
    {
      name: "tasks.<id>.input",
      subject: s("tasks.h-none.input"),
      valid: { text: "Oslo" },
      reply: UserInputReply,
      count: 80,
      maybeNobody: true,
    },
    {
      name: "goals.submit",
      subject: s("goals.submit"),
      valid: { description: "grow", priority: 1, maxReplans: 0 },
      reply: GoalReply,
      count: 150,
    },
    { name: "goals.list", subject: s("goals.list"), valid: {}, reply: GoalListReply, count: 80 },
    { name: "goals.<id>.get", subject: s("goals.h-none.get"), valid: {}, reply: GoalGetReply, count: 60 },
    { name: "goals.<id>.resume", subject: s("goals.h-none.resume"), valid: {}, reply: GoalReply, count: 60 },
    { name: "goals.<id>.cancel", subject: s("goals.h-none.cancel"), valid: {}, reply: GoalReply, count: 60 },
    {
      name: "compiler.compile",
      subject: s("compiler.compile"),
      valid: { type: "compiler.compile", prompt: "Summarise", inputNames: ["topic"], maxAttempts: 1 },
      reply: CompileReply,
      count: 150,
    },
    {
      name: "evaluator.evaluate",
      subject: s("evaluator.evaluate"),
      valid: { type: "evaluator.evaluate", taskId: "h-eval", xml: TEMPLATE, inputs: { topic: "cats" } },
      reply: EvaluateReply,
      count: 300,
    },
    {
      name: "handler.execute",
      subject: s("handler.execute"),
      valid: { type: "handler.execute", taskId: "h-exec", nodePath: "0", prompt: "hi" },
      reply: ExecuteReply,
      count: 250,
    },
    {
      name: "handler.script",
      subject: s("handler.script"),
      valid: { type: "handler.script", taskId: "h-script", nodePath: "0", argv: ["true"], timeoutMs: 2000 },
      reply: ScriptReply,
      count: 200,
    },
    {
      name: "memory.match",
      subject: s("memory.match"),
      valid: { type: "memory.match", templateDescription: "d", templateType: "atomic", inputs: { topic: "cats" } },
      reply: MatchReply,
      count: 200,
    },
    { name: "control.cancel", subject: s("control.cancel"), valid: { type: "task.cancel", taskId: "h-none" }, count: 60, publish: true },
    {
      name: "control.superseded",
      subject: s("control.superseded"),
      valid: { type: "task.superseded", taskId: "h-none", owner: "x" },
      count: 60,
      publish: true,
    },
    {
      name: "control.goals",
      subject: s("control.goals"),
      valid: { action: "stop", goalId: "h-none", reason: "x" },
      count: 60,
      publish: true,
    },
    {
      name: "progress.<id>",
      subject: s("progress.h-none"),
      valid: { type: "task.progress", taskId: "h-none", event: "x" },
      count: 60,
      publish: true,
    },
  ];
}

/** Ids in a subject's id token: wildcards are delivered as they are, dots make another subject, spaces cannot be sent. */
const SUBJECT_IDS = [
  "*",
  ">",
  "a.b",
  "$JS.API.STREAM.LIST",
  "a b",
  "tab\there",
  "nul\u0000x",
  "esc\u001b[31m",
  "del\u007f",
  "é",
  "😀",
  "x".repeat(65),
  "x".repeat(300),
  "__proto__",
  "constructor",
  "prototype",
];

describe("hostile input against the roles in separate processes", () => {
  it("answers every hostile request in time with a structured error or an acceptance, and keeps serving", async () => {
    const seed = hostileSeed();
    console.log(`hostile e2e: seed ${seed} (HOSTILE_SEED=${seed} reproduces it)`);
    const rand = prng(seed);
    const root = randomRoot();
    const script = join(dir, "script.json");
    writeFileSync(
      script,
      JSON.stringify({ rules: [{ match: { lastUser: "EVIL" }, reply: "polluted" }], default: { reply: "still alive" } }),
    );
    const mock = startCli(["mock-llm", "--port", "0", "--script", script, "--quiet"]);
    processes.push(mock);
    const begun = Date.now();
    // The roles that do not call the model start while the mock model does.
    const start = (role: (typeof ROLES)[number], url = "http://127.0.0.1:9/v1") => {
      const env = { OPENAI_BASE_URL: url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0", DIRIGENT_LOG_LEVEL: "error" };
      const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(worker);
      return worker;
    };
    const early = new Map(["director", "evaluator", "supervisor"].map((role) => [role, start(role as (typeof ROLES)[number])]));
    const [url] = await mock.waitFor(/http:\/\/127\.0\.0\.1:\d+\/v1/, 30_000);
    const workers = ROLES.map((role) => early.get(role) ?? start(role, url));
    await Promise.all(workers.map((w) => w.waitFor(/ready/, 30_000)));
    const started = Date.now();
    console.log(`hostile e2e: processes ready in ${started - begun} ms`);

    const nc = await connect({ servers: server.url, name: "hostile-client" });
    const failures: string[] = [];
    const outcomes = new Map<string, number>();
    const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    const acceptedTasks: string[] = [];
    const acceptedGoals: string[] = [];
    try {
      // Every target's hostile bodies, and hostile ids in the id token of every subject that has one.
      const jobs: Array<{ target: Target; subject: string; hostile: HostileCase; id?: string }> = [];
      for (const target of targets(root)) {
        for (const hostile of hostileCases(rand, target.valid, target.count)) jobs.push({ target, subject: target.subject, hostile });
        if (target.subject.includes(".h-none.")) {
          for (const id of SUBJECT_IDS)
            jobs.push({
              target,
              subject: target.subject.replace(".h-none.", `.${id}.`),
              hostile: {
                kind: `id ${JSON.stringify(id.slice(0, 12))} in the subject`,
                body: new TextEncoder().encode(JSON.stringify(target.valid)),
              },
              id,
            });
        }
      }
      // Shuffled, so every role is under attack at the same time.
      for (let i = jobs.length - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        [jobs[i], jobs[j]] = [jobs[j] as (typeof jobs)[number], jobs[i] as (typeof jobs)[number]];
      }
      console.log(`hostile e2e: ${jobs.length} messages`);

      const check = async ({ target, subject, hostile, id }: (typeof jobs)[number]) => {
        const where = `${target.name} (${hostile.kind}${hostile.headers ? ", hostile headers" : ""})`;
        if (target.publish) {
          try {
            nc.publish(subject, hostile.body, hostile.headers ? { headers: toHeaders(hostile.headers) } : undefined);
            count("published");
          } catch (err) {
            failures.push(`${where}: could not be published: ${String(err)}`);
          }
          return;
        }
        const answer = await send(nc, subject, hostile.body, hostile.headers);
        if (answer.kind === "refused") {
          // The client library will not send a subject with white space; nothing reaches the runtime.
          if (id !== undefined && /\s/.test(id)) return void count("refused by the client");
          return void failures.push(`${where}: the client refused to send it: ${answer.message}`);
        }
        if (answer.kind === "no-responders") {
          // A dot in the id token makes it another subject, which nobody serves.
          if (target.maybeNobody || (id !== undefined && id.includes("."))) return void count("no responders");
          return void failures.push(`${where}: no responders`);
        }
        if (answer.kind === "timeout") return void failures.push(`${where}: no answer within ${REQUEST_TIMEOUT_MS} ms${hint(hostile)}`);
        let json: unknown;
        try {
          json = JSON.parse(answer.text);
        } catch {
          return void failures.push(`${where}: answer is not JSON: ${answer.text.slice(0, 200)}`);
        }
        const error = ErrorReply.safeParse(json);
        if (error.success) {
          if (!ErrorCode.options.includes(error.data.error.code) || error.data.error.message.length === 0)
            failures.push(`${where}: error without code or message: ${answer.text.slice(0, 200)}`);
          return void count(error.data.error.code);
        }
        const good = target.reply?.safeParse(json);
        if (good?.success) {
          count("answered");
          const data = json as { taskId?: string; goalId?: string; status?: string };
          if (target.name === "tasks.submit" && data.status === "accepted" && data.taskId) acceptedTasks.push(data.taskId);
          if (target.name === "goals.submit" && data.status === "accepted" && data.goalId) acceptedGoals.push(data.goalId);
          return;
        }
        failures.push(`${where}: neither an error reply nor a valid answer: ${answer.text.slice(0, 300)}`);
      };
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < jobs.length) {
            const job = jobs[next++];
            if (job) await check(job);
          }
        }),
      );
      console.log(
        `hostile e2e: ${Date.now() - started} ms; outcomes ${JSON.stringify(Object.fromEntries(outcomes))}; ${acceptedTasks.length} tasks and ${acceptedGoals.length} goals accepted`,
      );
      expect(failures, `seed ${seed}: ${failures.length} failures:\n${failures.slice(0, 40).join("\n")}`).toEqual([]);

      // Bodies of 900 KB, one per subject (a huge string in a field that reaches the model, or a huge object), after
      // the others: a process they block would make every other request time out too.
      const huge = targets(root).flatMap((target) =>
        hostileCases(rand, target.valid, 0, { huge: 2 }).map((hostile) => ({ target, subject: target.subject, hostile })),
      );
      const bigText = "a".repeat(900 * 1024);
      const bigXml = `<task><description>${bigText}</description></task>`;
      for (const target of targets(root)) {
        const field =
          target.name === "handler.execute"
            ? { prompt: bigText }
            : target.name === "evaluator.evaluate" || target.name === "tasks.submit"
              ? { xml: bigXml }
              : undefined;
        if (field)
          huge.push({
            target,
            subject: target.subject,
            hostile: {
              kind: "900 KB body",
              body: new TextEncoder().encode(JSON.stringify({ ...target.valid, ...field, taskId: `h-huge-${target.name.length}` })),
            },
          });
      }
      await Promise.all(huge.map(check));
      for (const taskId of acceptedTasks.splice(0))
        expect(await replyOf(nc, `${root}.tasks.${taskId}.cancel`, "")).toMatchObject({ taskId });
      expect(
        failures,
        `seed ${seed}: bodies of 900 KB: ${failures.length} failures (a Handler counting the tokens of 900 KB spins: token counting is another branch's, confirm after merging it):\n${failures.join("\n")}`,
      ).toEqual([]);

      // The hostile tasks and goals that were accepted are cancelled: each answer is structured.
      for (const taskId of acceptedTasks) expect(await replyOf(nc, `${root}.tasks.${taskId}.cancel`, "")).toMatchObject({ taskId });
      for (const goalId of acceptedGoals) expect(await replyOf(nc, `${root}.goals.${goalId}.cancel`, "")).toMatchObject({ goalId });

      // No process died.
      for (const [i, worker] of workers.entries()) {
        expect(worker.child.exitCode, `${ROLES[i]} exited:\n${worker.output().slice(-2000)}`).toBeNull();
        expect(() => process.kill(worker.child.pid ?? -1, 0), `${ROLES[i]} is gone`).not.toThrow();
      }
      // Every role still answers a valid request.
      expect(await replyOf(nc, `${root}.tasks.h-nothing.get`, "")).toMatchObject({ error: { code: "NOT_FOUND" } });
      expect(await replyOf(nc, `${root}.goals.list`, "{}")).toMatchObject({ goals: expect.any(Array) });
      expect(await replyOf(nc, `${root}.memory.match`, JSON.stringify(targets(root)[13]?.valid))).toMatchObject({ type: "memory.matched" });
      expect(
        await replyOf(
          nc,
          `${root}.handler.execute`,
          JSON.stringify({ type: "handler.execute", taskId: "h-final-exec", nodePath: "0", prompt: "are you there?" }),
        ),
      ).toMatchObject({
        type: "handler.result",
        result: { status: "COMPLETE", content: "still alive" },
      });
      expect(
        await replyOf(
          nc,
          `${root}.evaluator.evaluate`,
          JSON.stringify({ type: "evaluator.evaluate", taskId: "h-final-eval", xml: TEMPLATE, inputs: { topic: "dogs" } }),
        ),
      ).toMatchObject({
        type: "evaluator.result",
        result: { status: "COMPLETE", content: "still alive" },
      });

      // Prototype keys in inputs: stripped, never inherited. With an own `topic` the task runs with it; without one
      // the placeholder is missing (the task fails), whatever the prototype key carried.
      const proto = async (taskId: string, xml: string, inputs: string) => {
        const results = nc.subscribe(`${root}.tasks.${taskId}.result`, { max: 1 });
        const accepted = await replyOf(
          nc,
          `${root}.tasks.submit`,
          `{"taskId":${JSON.stringify(taskId)},"xml":${JSON.stringify(xml)},"inputs":${inputs}}`,
        );
        expect(accepted, `${taskId}: ${inputs}`).toEqual({ taskId, status: "accepted" });
        for await (const m of results) return TaskOutcome.parse(m.json());
        throw new Error(`no result for ${taskId}`);
      };
      const stamp = Date.now().toString(36);
      expect(
        await proto(`h-proto-own-${stamp}`, TEMPLATE, '{"__proto__":{"topic":"EVIL","polluted":"EVIL"},"topic":"cats"}'),
      ).toMatchObject({ status: "COMPLETE", content: "still alive" });
      for (const [i, inputs] of [
        '{"__proto__":{"topic":"EVIL"}}',
        '{"constructor":{"prototype":{"topic":"EVIL"}}}',
        '{"a":{"__proto__":{"topic":"EVIL"}}}',
        "{}",
      ].entries()) {
        const outcome = await proto(`h-proto-${i}-${stamp}`, TEMPLATE, inputs);
        expect(outcome.content, inputs).not.toMatch(/polluted/);
        expect(outcome, inputs).toMatchObject({ status: "FAILED", error: { reason: "input_validation_failure" } });
      }
      const inherited = await proto(
        `h-proto-ctor-${stamp}`,
        "<task><description>Say {{constructor}} {{toString}}</description></task>",
        "{}",
      );
      expect(inherited, "an Object.prototype member bound as an input").toMatchObject({
        status: "FAILED",
        error: { reason: "input_validation_failure" },
      });

      // A good task submitted afterwards completes.
      const good = await proto(`h-good-${stamp}`, TEMPLATE, '{"topic":"the sea"}');
      expect(good).toMatchObject({ status: "COMPLETE", content: "still alive" });
      for (const [i, worker] of workers.entries()) expect(worker.child.exitCode, `${ROLES[i]} exited`).toBeNull();
      console.log(`hostile e2e: ${Date.now() - started} ms with the checks after it`);
    } finally {
      await nc.drain();
    }
  }, 120_000);
});

function toHeaders(values: Record<string, string>) {
  const h = natsHeaders();
  for (const [k, v] of Object.entries(values)) h.set(k, v);
  return h;
}

/** The parsed answer of a request that must be answered. */
async function replyOf(nc: NatsConnection, subject: string, body: string): Promise<unknown> {
  const answer = await send(nc, subject, new TextEncoder().encode(body));
  if (answer.kind !== "reply") throw new Error(`${subject}: ${answer.kind}`);
  return JSON.parse(answer.text) as unknown;
}

/** Which other branch a timeout may belong to (size limits, token counting, XML limits). */
function hint(hostile: HostileCase): string {
  if (hostile.kind === "900 KB body") return " (size limits and token counting are another branch's: confirm after merging it)";
  if (/xml/.test(hostile.kind)) return " (XML entity and depth limits are another branch's: confirm after merging it)";
  return "";
}
