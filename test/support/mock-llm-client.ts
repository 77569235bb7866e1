/** Helpers of the mock-llm tests: servers started per test (closed after each), an `openai` client, log waits. */
import OpenAI from "openai";
import { afterEach } from "vitest";
import { startMockLlm, type MockLlmServer, type MockScript } from "../../runtime/model/mock-server.js";

export type Message = OpenAI.Chat.ChatCompletionMessageParam;

const servers: MockLlmServer[] = [];

/** Closes the servers a test started; call once at the top of a test file. */
export function closeServersAfterEach(): void {
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
}

export async function start(script?: MockScript, log?: (line: string) => void): Promise<{ server: MockLlmServer; client: OpenAI }> {
  const server = await startMockLlm({ script, log });
  servers.push(server);
  return { server, client: new OpenAI({ baseURL: server.url, apiKey: "test", maxRetries: 0 }) };
}

export function user(content: string): Message {
  return { role: "user", content };
}

export async function ask(client: OpenAI, messages: Message[], model = "mock-model"): Promise<OpenAI.Chat.ChatCompletion> {
  return client.chat.completions.create({ model, messages });
}

export function textOf(completion: OpenAI.Chat.ChatCompletion): string | null {
  return completion.choices[0]?.message.content ?? null;
}

export function functionCalls(completion: OpenAI.Chat.ChatCompletion): { id: string; name: string; arguments: string }[] {
  return (completion.choices[0]?.message.tool_calls ?? []).flatMap((c) =>
    c.type === "function" ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
  );
}

/** Resolves with the first log line that contains `text`. */
export function logWatcher(): { log: (line: string) => void; next: (text: string) => Promise<string> } {
  const lines: string[] = [];
  const waiters: { text: string; resolve: (line: string) => void }[] = [];
  return {
    log(line) {
      lines.push(line);
      for (const w of waiters.filter((w) => line.includes(w.text))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    },
    next(text) {
      const seen = lines.find((l) => l.includes(text));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ text, resolve }));
    },
  };
}
