/** `dirigent compile` and `dirigent run --prompt` as a user runs them, against a real nats-server and the mock model. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createSubjects } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";

const COMPILER = "dirigent task compiler";
const GOOD = `<task type="atomic">
  <description>Write a haiku about {{topic}}.</description>
</task>`;

let server: TestNatsServer;
let mock: MockLlmServer;
let dir: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { system: COMPILER, anyMessage: "FIX-ME", lastUser: "not a valid template" }, reply: "```xml\n" + GOOD + "\n```" },
        { match: { system: COMPILER, anyMessage: "FIX-ME" }, reply: "<task><description>haiku</task>" },
        { match: { system: COMPILER, anyMessage: "NEVER" }, reply: "no." },
        { match: { system: COMPILER }, reply: GOOD },
        { match: { lastUser: "haiku about autumn" }, reply: "leaves let go softly" },
      ],
    },
  });
  dir = mkdtempSync(join(tmpdir(), "dirigent-compile-cli-"));
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" });
const cli = (...args: string[]) => startCli([...args, "--nats", server.url, "--prefix", randomRoot()], env());

describe("dirigent compile", () => {
  it("prints the validated template, with an embedded runtime when none answers", async () => {
    const run = cli("compile", "a haiku about a topic");
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/no runtime reachable; running an embedded one/);
    expect(run.output()).toContain(GOOD);
    const json = cli("compile", "a haiku about a topic", "--json");
    expect(await json.exited).toBe(0);
    expect(JSON.parse(json.stdout()), json.output()).toMatchObject({ type: "compiler.result", xml: GOOD, attempts: 1 });
  });

  it("feeds the errors back, reports the fix, and writes --out", async () => {
    const out = join(dir, "fixed.xml");
    const run = cli("compile", "FIX-ME: a haiku", "--out", out);
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/valid after 2 attempts; fixed: attempt 1: line 1, col \d+: not well-formed XML: mismatched tag/);
    expect(run.output()).toContain(`wrote ${out}`);
    expect(readFileSync(out, "utf8")).toBe(`${GOOD}\n`);
  });

  it("--run runs the template and exits with its status; the embedded runtime stores the result and acks the task", async () => {
    const root = randomRoot();
    const args = ["compile", "a haiku about a topic", "--run", "-i", "topic=autumn", "--json", "--task-id", "haiku-1"];
    const run = startCli([...args, "--nats", server.url, "--prefix", root], env());
    expect(await run.exited, run.output()).toBe(0);
    // The answer on stdout; log lines go to stderr.
    expect(JSON.parse(run.stdout()), run.output()).toMatchObject({ status: "COMPLETE", content: "leaves let go softly" });
    // The process opened NATS before it knew it would run a Director: the events stream is made when one starts, so
    // the result is readable after the fact, and the intake item is acked before the process exits.
    const subjects = createSubjects(root);
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const events = await jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.taskResult("haiku-1") });
      expect(events.state.subjects?.[subjects.taskResult("haiku-1")]).toBe(1);
      expect((await jsm.streams.info(subjects.intakeStream)).state.messages).toBe(0);
    } finally {
      await nc.close();
    }
  });

  it("exits 1 naming the errors when no answer is valid, and 2 on a bad --max-attempts", async () => {
    const never = cli("compile", "NEVER", "--max-attempts", "1");
    expect(await never.exited).toBe(1);
    expect(never.output()).toMatch(/INVALID_TEMPLATE: compiler: no valid template after 1 attempt: .*not XML/);
    const bad = cli("compile", "x", "--max-attempts", "9");
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/--max-attempts '9': must be an integer from 1 to 5/);
  });
});

describe("dirigent run --prompt", () => {
  it("submits the words; the runtime compiles, shows and runs the template", async () => {
    const run = cli("run", "--prompt", "a haiku about a topic", "-i", "topic=autumn");
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/task\.compiled {2}compiled the prompt into a template \(1 attempt\)\n<task type="atomic">/);
    expect(run.output()).toMatch(/result: COMPLETE[\s\S]*leaves let go softly/);
  });

  it("refuses a file and --prompt together with exit code 2", async () => {
    const file = join(dir, "one.xml");
    writeFileSync(file, GOOD);
    const run = cli("run", file, "--prompt", "a haiku");
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(/give a template FILE or --prompt TEXT, not both/);
  });
});
