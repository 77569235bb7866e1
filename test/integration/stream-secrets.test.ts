/**
 * A secret the model streams in pieces never reaches a stream: over a real nats-server, the Handler's `model.delta`
 * events of an answer that splits the API key across pieces (the mock model streams a rule's `chunks` exactly) hold
 * no piece of it, and joined they are the masked answer; a tail that only looked like the start of a secret is sent
 * when the answer ends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

const SECRET = "sk-live-SECRET42";

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

describe("a streamed answer", () => {
  it("masks a secret split across model.delta pieces, and sends a held tail that was none at the end", async () => {
    await using stack = await startStack({
      url: server.url,
      script: {
        rules: [
          { match: { lastUser: "split" }, chunks: ["The key is sk-li", "ve-SEC", "RET42", " and that is all."] },
          { match: { lastUser: "tail" }, chunks: ["Nothing secret, just sk-l", "ive"] },
        ],
      },
      config: { streamDeltas: true, openaiApiKey: SECRET, reparse: false },
    });
    const deltasOf = async (prompt: string) => {
      const events: TaskEvent[] = [];
      const outcome = await stack.client.run({ xml: `<task><description>${prompt}</description></task>`, taskId: newTaskId() }, (e) =>
        events.push(e),
      );
      expect(outcome.status).toBe("COMPLETE");
      expect(JSON.stringify(events)).not.toContain(SECRET);
      return { outcome, deltas: events.filter((e) => e.type === "model.delta").map((e) => String(e.data?.["text"])) };
    };

    const split = await deltasOf("split");
    expect(split.outcome.content).toBe("The key is [redacted] and that is all.");
    expect(split.deltas.join("")).toBe("The key is [redacted] and that is all.");
    // Only what could still become the secret was held back: the text before it went out with the first piece.
    expect(split.deltas[0]).toBe("The key is ");
    expect(split.deltas.some((d) => d.includes("sk-li") || d.includes("ve-SEC") || d.includes("RET42"))).toBe(false);

    const tail = await deltasOf("tail");
    expect(tail.deltas).toEqual(["Nothing secret, just ", "sk-live"]);
  });
});
