/** The mock model through the real `openai` SDK: replies, rule matching, tool calls, streaming and usage. */
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { parseMockScript, type MockScript } from "../../runtime/model/mock-server.js";
import { ask, closeServersAfterEach, functionCalls, start, textOf, user, type Message } from "../support/mock-llm-client.js";

closeServersAfterEach();

describe("mock-llm: plain replies", () => {
  it("echoes the last user message when there is no script", async () => {
    const { server, client } = await start();
    const completion = await ask(client, [user("first"), { role: "assistant", content: "ok" }, user("hello there")]);
    expect(textOf(completion)).toBe("mock: hello there");
    expect(completion.id).toBe("chatcmpl-mock-1");
    expect(completion.model).toBe("mock-model");
    expect(completion.object).toBe("chat.completion");
    expect(completion.created).toBeGreaterThan(0);
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.answeredBy).toBe("echo");
    expect(server.requests[0]?.body.messages).toHaveLength(3);
  });

  it("cuts the echo at 200 characters and echoes the requested model", async () => {
    const { client } = await start();
    const completion = await ask(client, [user("x".repeat(500))], "gpt-4o-mini");
    expect(textOf(completion)).toBe(`mock: ${"x".repeat(200)}`);
    expect(completion.model).toBe("gpt-4o-mini");
  });

  it("gives each response a new id", async () => {
    const { client } = await start();
    const ids = [(await ask(client, [user("a")])).id, (await ask(client, [user("b")])).id];
    expect(ids).toEqual(["chatcmpl-mock-1", "chatcmpl-mock-2"]);
  });

  it("fills {{lastUser}} in the default reply, taking the user text literally", async () => {
    const { server, client } = await start({ rules: [], default: { reply: "you said <{{lastUser}}> ({{lastUser}})" } });
    expect(textOf(await ask(client, [user("cost $& $1")]))).toBe("you said <cost $& $1> (cost $& $1)");
    expect(server.requests[0]?.answeredBy).toBe("default");
  });

  it("fills {{lastTool}} with the last tool result, so a tool's answer can be echoed back", async () => {
    const { client } = await start({
      rules: [{ match: { hasToolResult: true }, reply: "the tool said: {{lastTool}}" }],
      default: { reply: "[{{lastTool}}]" },
    });
    const call = { id: "c1", type: "function" as const, function: { name: "lookup", arguments: "{}" } };
    const messages: Message[] = [
      user("look it up"),
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "42 $&" },
    ];
    expect(textOf(await ask(client, messages))).toBe("the tool said: 42 $&");
    expect(textOf(await ask(client, [user("no tool yet")]))).toBe("[]");
  });

  it("reads the text parts of array content", async () => {
    const { client } = await start({ rules: [{ match: { lastUser: "needle" }, reply: "found" }] });
    const completion = await ask(client, [
      {
        role: "user",
        content: [
          { type: "text", text: "hay " },
          { type: "text", text: "needle" },
        ],
      },
    ]);
    expect(textOf(completion)).toBe("found");
  });
});

describe("mock-llm: rule matching", () => {
  const script: MockScript = {
    rules: [
      { match: { lastUser: "weather" }, reply: "substring rule" },
      { match: { lastUser: { regex: "^plan\\b", flags: "i" } }, reply: "regex rule" },
      { match: { system: "You are terse" }, reply: "system rule" },
      { match: { model: "special-model" }, reply: "model rule" },
      { match: { turn: 2 }, reply: "turn-2 rule" },
      { match: { anyMessage: "remember", turn: 3 }, reply: "any-message rule" },
      { match: { lastUser: "first" }, reply: "first wins" },
      { match: { lastUser: "first" }, reply: "never reached" },
    ],
  };

  it("matches by lastUser substring and regex", async () => {
    const { server, client } = await start(script);
    expect(textOf(await ask(client, [user("how is the weather?")]))).toBe("substring rule");
    expect(textOf(await ask(client, [user("PLAN the trip")]))).toBe("regex rule");
    expect(textOf(await ask(client, [user("explain the plan")]))).toBe("mock: explain the plan");
    expect(server.requests.map((r) => r.answeredBy)).toEqual([0, 1, "echo"]);
  });

  it("lastUser looks only at the last user message", async () => {
    const { client } = await start(script);
    const completion = await ask(client, [
      user("weather"),
      { role: "assistant", content: "a" },
      user("other"),
      { role: "assistant", content: "b" },
      user("again"),
    ]);
    expect(textOf(completion)).toBe("mock: again");
  });

  it("matches by system message, model and turn", async () => {
    const { client } = await start(script);
    expect(textOf(await ask(client, [{ role: "system", content: "You are terse." }, user("hi")]))).toBe("system rule");
    expect(textOf(await ask(client, [user("hi")], "special-model"))).toBe("model rule");
    expect(textOf(await ask(client, [user("hi"), { role: "assistant", content: "hello" }, user("and?")]))).toBe("turn-2 rule");
  });

  it("requires every condition of a rule", async () => {
    const { client } = await start(script);
    const turn1 = [user("remember this")];
    const turn3: Message[] = [
      ...turn1,
      { role: "assistant", content: "ok" },
      user("next"),
      { role: "assistant", content: "ok" },
      user("go"),
    ];
    expect(textOf(await ask(client, turn1))).toBe("mock: remember this");
    expect(textOf(await ask(client, turn3))).toBe("any-message rule");
  });

  it("lets the first matching rule win", async () => {
    const { client } = await start(script);
    expect(textOf(await ask(client, [user("first")]))).toBe("first wins");
  });

  it("uses a new script after setScript", async () => {
    const { client, server } = await start(script);
    server.setScript({ rules: [], default: { reply: "replaced" } });
    expect(textOf(await ask(client, [user("weather")]))).toBe("replaced");
  });
});

describe("mock-llm: tool calls", () => {
  const tools: OpenAI.Chat.ChatCompletionTool[] = [
    { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
  ];
  const script: MockScript = {
    rules: [
      { match: { hasToolResult: "sunny" }, reply: "It is sunny in Oslo." },
      { match: { hasToolResult: true }, reply: "The tool said something else." },
      { match: { lastUser: "weather", hasToolResult: false }, toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
      { match: { lastUser: "broken" }, toolCalls: [{ name: "get_weather", arguments: '{"city": "Oslo"', id: "call_fixed" }] },
    ],
  };

  it("round-trips: tool call, then a reply to the tool result", async () => {
    const { client } = await start(script);
    const messages: Message[] = [user("what is the weather in Oslo?")];
    const first = await client.chat.completions.create({ model: "mock-model", messages, tools });
    expect(first.choices[0]?.finish_reason).toBe("tool_calls");
    expect(textOf(first)).toBeNull();
    const [call] = functionCalls(first);
    expect(call?.name).toBe("get_weather");
    expect(JSON.parse(call?.arguments ?? "")).toEqual({ city: "Oslo" });
    expect(call?.id).toMatch(/^call_mock_\d+$/);

    const assistant = first.choices[0]?.message;
    if (assistant === undefined || call === undefined) throw new Error("no tool call");
    messages.push(assistant, { role: "tool", tool_call_id: call.id, content: '{"sky": "sunny"}' });
    const second = await client.chat.completions.create({ model: "mock-model", messages, tools });
    expect(textOf(second)).toBe("It is sunny in Oslo.");
    expect(second.choices[0]?.finish_reason).toBe("stop");

    messages.splice(-1, 1, { role: "tool", tool_call_id: call.id, content: "rain" });
    expect(textOf(await ask(client, messages))).toBe("The tool said something else.");
  });

  it("delivers invalid JSON arguments verbatim", async () => {
    const { client } = await start(script);
    const completion = await ask(client, [user("broken call please")]);
    expect(functionCalls(completion)).toEqual([{ id: "call_fixed", name: "get_weather", arguments: '{"city": "Oslo"' }]);
  });
});

describe("mock-llm: streaming", () => {
  const script: MockScript = {
    rules: [
      {
        match: { lastUser: "tools" },
        reply: "Calling two tools.",
        toolCalls: [
          { name: "search", arguments: { query: "actor model", limit: 3 } },
          { name: "broken", arguments: "{not json" },
        ],
      },
    ],
    default: { reply: "  Streaming   works,\nword by word: {{lastUser}}  " },
  };

  it("streams text deltas that add up to the full reply", async () => {
    const { client } = await start(script);
    const full = textOf(await ask(client, [user("go")]));
    const stream = await client.chat.completions.create({ model: "mock-model", messages: [user("go")], stream: true });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? ""));
    expect(deltas.filter((d) => d !== "").length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe(full);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks.every((c) => c.id === chunks[0]?.id && c.object === "chat.completion.chunk" && c.model === "mock-model")).toBe(true);
    expect(chunks.some((c) => c.usage != null)).toBe(false);
  });

  it("streams the pieces a rule's chunks give, exactly; the text is their concatenation", async () => {
    const pieces = ["The key is sk-li", "ve-SEC", "RET42", " ok"];
    const { client } = await start({ rules: [{ match: { lastUser: "chunked" }, chunks: pieces }] });
    expect(textOf(await ask(client, [user("chunked")]))).toBe(pieces.join(""));
    const stream = await client.chat.completions.create({ model: "mock-model", messages: [user("chunked")], stream: true });
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(...chunk.choices.map((ch) => ch.delta.content ?? ""));
    expect(deltas.filter((d) => d !== "")).toEqual(pieces);
    expect(() => parseMockScript({ rules: [{ reply: "a", chunks: ["a"] }] })).toThrow(
      "/rules/0/chunks: give 'reply' or 'chunks', not both",
    );
  });

  it("ends with a usage chunk when include_usage is set", async () => {
    const { client } = await start(script);
    const plain = await ask(client, [user("go")]);
    const stream = await client.chat.completions.create({
      model: "mock-model",
      messages: [user("go")],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual(plain.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage == null)).toBe(true);
  });

  it("streams tool-call deltas the SDK reassembles", async () => {
    const { client } = await start(script);
    const plain = await ask(client, [user("tools")]);
    const runner = client.chat.completions.stream({ model: "mock-model", messages: [user("tools")] });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    runner.on("chunk", (chunk) => chunks.push(chunk));
    const final = await runner.finalChatCompletion();

    const argumentDeltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    expect(argumentDeltas.filter((d) => d.index === 0).length).toBeGreaterThan(2);
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    expect(final.choices[0]?.message.content).toBe("Calling two tools.");
    const streamed = functionCalls(final);
    expect(streamed.map((c) => [c.name, c.arguments])).toEqual(functionCalls(plain).map((c) => [c.name, c.arguments]));
    expect(streamed[1]?.arguments).toBe("{not json");
    expect(JSON.parse(streamed[0]?.arguments ?? "")).toEqual({ query: "actor model", limit: 3 });
  });
});

describe("mock-llm: usage", () => {
  it("reports scripted counts, estimating the missing one", async () => {
    const { client } = await start({
      rules: [
        { match: { lastUser: "exact" }, reply: "x", usage: { prompt_tokens: 123, completion_tokens: 45 } },
        { match: { lastUser: "half" }, reply: "y".repeat(40), usage: { prompt_tokens: 7 } },
      ],
    });
    expect((await ask(client, [user("exact")])).usage).toEqual({ prompt_tokens: 123, completion_tokens: 45, total_tokens: 168 });
    expect((await ask(client, [user("half")])).usage).toEqual({ prompt_tokens: 7, completion_tokens: 10, total_tokens: 17 });
  });

  it("estimates plausible integer counts of at least 1", async () => {
    const { client } = await start({ rules: [{ reply: "" }] });
    const small = (await ask(client, [user("a")])).usage;
    expect(small).toEqual({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
    const big = (await ask(client, [{ role: "system", content: "s".repeat(400) }, user("u".repeat(400))])).usage;
    expect(big?.prompt_tokens).toBe(200);
    expect(Number.isInteger(big?.completion_tokens)).toBe(true);
  });
});
