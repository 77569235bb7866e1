/**
 * Hostile input on every subject any client on the bus can reach, against the five roles in five processes (a real
 * nats-server, the mock model over HTTP): thousands of malformed and hostile messages from a seeded PRNG (the seed is
 * printed; HOSTILE_SEED reproduces a run). Every request is answered in time with a structured error, or accepted;
 * no process dies or stops serving; prototype keys in inputs change nothing; a good task still completes.
 */
import { connect } from "@nats-io/transport-node";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode, ErrorReply, TaskOutcome } from "../../protocol/index.js";
import { hostileCases, hostileSeed, prng, type HostileCase } from "../support/hostile.js";
import { hint, REQUEST_TIMEOUT_MS, replyOf, send, SUBJECT_IDS, targets, TEMPLATE, toHeaders, type Target } from "../support/hostile-bus.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

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
      // the placeholder can never be filled, whatever the prototype key carried: the submission is refused.
      const submitProto = (taskId: string, xml: string, inputs: string) =>
        replyOf(nc, `${root}.tasks.submit`, `{"taskId":${JSON.stringify(taskId)},"xml":${JSON.stringify(xml)},"inputs":${inputs}}`);
      const proto = async (taskId: string, xml: string, inputs: string) => {
        const results = nc.subscribe(`${root}.tasks.${taskId}.result`, { max: 1 });
        expect(await submitProto(taskId, xml, inputs), `${taskId}: ${inputs}`).toEqual({ taskId, status: "accepted" });
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
        expect(await submitProto(`h-proto-${i}-${stamp}`, TEMPLATE, inputs), inputs).toMatchObject({
          error: { code: "INVALID_TEMPLATE", message: expect.stringContaining("no input 'topic'") },
        });
      }
      const inherited = await submitProto(
        `h-proto-ctor-${stamp}`,
        "<task><description>Say {{constructor}} {{toString}}</description></task>",
        "{}",
      );
      expect(inherited, "an Object.prototype member bound as an input").toMatchObject({
        error: { code: "INVALID_TEMPLATE", message: expect.stringContaining("no input 'constructor'") },
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
