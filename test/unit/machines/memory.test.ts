import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import { matchIndex, memoryMachine } from "../../../machines/memory.js";
import type { MatchReply } from "../../../protocol/index.js";

const request = { type: "memory.match" as const, templateDescription: "parse the xml template", templateType: "atomic", inputs: {} };

describe("memory machine", () => {
  it("answers with no matches from an empty index", () => {
    const answers: MatchReply[] = [];
    const actor = createActor(memoryMachine.provide({ actions: { answer: (_, p) => answers.push(p.reply) } }), { input: {} }).start();
    actor.send({ ...request, requestId: "r1" });
    expect(answers).toEqual([{ type: "memory.matched", context: "no relevant files found", matches: [] }]);
  });

  it("ranks entries by the share of query words in their metadata", () => {
    const index = [
      { path: "/a.ts", metadata: "template parser for xml" },
      { path: "/b.ts", metadata: "xml helpers" },
      { path: "/c.ts", metadata: "unrelated" },
    ];
    const matches = matchIndex(index, request);
    expect(matches.map((m) => m.path)).toEqual(["/a.ts", "/b.ts"]);
    expect(matches[0]?.score).toBeGreaterThan(matches[1]?.score ?? 1);
  });
});
