/**
 * Remote A2A agents as tools: the `a2aAgents` section of the tool configuration, a small agent started here with the
 * A2A SDK, its skill listed by `dirigent tools list` and called by a task's session as `AGENT__SKILL`, end to end
 * over a real nats-server and the mock model.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { listTools } from "../../runtime/cli/tools.js";
import { taskAnswer } from "../../runtime/tools/a2a-agents.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startTestA2aAgent, type TestA2aAgent } from "../support/a2a-agent.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let agent: TestA2aAgent;
let dir: string;
let file: string;
const TOKEN = "a2a-test-token-4711";

beforeAll(async () => {
  server = await startTestNatsServer();
  agent = await startTestA2aAgent();
  dir = await mkdtemp(join(tmpdir(), "dirigent-a2a-tools-"));
  file = join(dir, "tools.json");
  process.env.DIRIGENT_TEST_A2A_TOKEN = TOKEN;
  await writeFile(
    file,
    JSON.stringify({ a2aAgents: { loud: { url: agent.url, headers: { Authorization: "Bearer ${DIRIGENT_TEST_A2A_TOKEN}" } } } }),
  );
});

afterAll(async () => {
  delete process.env.DIRIGENT_TEST_A2A_TOKEN;
  await agent?.close();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("A2A agents as tools", () => {
  it("lists each skill of an agent as AGENT__SKILL", async () => {
    const listed = await listTools({ mcpConfig: file }, { DIRIGENT_TOOLS: "read_file" });
    expect(listed.find((t) => t.name === "loud__shout")).toMatchObject({
      source: "a2a",
      origin: "loud",
      idempotent: false,
      description: "Says the text louder. (skill 'shout' of the A2A agent 'shouter')",
      parameters: { required: ["text"] },
    });
  });

  it("a task's session calls the agent's skill, with the configured header, and gets its answer", async () => {
    await using s = await startStack({
      url: server.url,
      config: { mcpConfig: file },
      script: {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "loud__shout", arguments: { text: "hello there", inputs: { n: 1 } } }] },
          { match: { hasToolResult: true }, reply: "the agent answered" },
        ],
      },
    });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: "<task><description>Ask the agent.</description></task>", taskId: newTaskId() }, (e) =>
      events.push(e),
    );
    expect(outcome.status).toBe("COMPLETE");
    const toolMessage = s.mock.requests.flatMap((r) => r.body.messages).find((m) => m.role === "tool");
    expect(toolMessage?.content).toBe('HELLO THERE! {"inputs":{"n":1}}');
    expect(events.find((e) => e.type === "tool.call")?.data).toMatchObject({ tool: "loud__shout", source: "a2a", malformed: false });
    expect(agent.authorizations).toContain(`Bearer ${TOKEN}`);
  });

  it("answers an unfinished task as an error for the model", () => {
    const base = { id: "t", contextId: "c", artifacts: [], history: [], metadata: {} };
    const asking = {
      ...base,
      status: {
        state: 6,
        timestamp: undefined,
        message: {
          messageId: "m",
          contextId: "c",
          taskId: "t",
          role: 2,
          parts: [{ content: { $case: "text" as const, value: "Which city?" }, metadata: undefined, filename: "", mediaType: "" }],
          metadata: {},
          extensions: [],
          referenceTaskIds: [],
        },
      },
    };
    expect(taskAnswer(asking)).toBe("error: the agent asks for input, which a tool call cannot give: Which city?");
    expect(taskAnswer({ ...base, status: { state: 4, timestamp: undefined, message: undefined } })).toBe("error: the agent failed");
  });
});
