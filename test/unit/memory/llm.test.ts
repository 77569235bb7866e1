import { describe, expect, it } from "vitest";
import { parseChoice } from "../../../actors/memory/llm.js";
import type { Ranked } from "../../../actors/memory/rank.js";
import { loadConfig } from "../../../runtime/config.js";
import { cleanSummary, summaryPrompt } from "../../../runtime/indexer/summarize.js";

const candidates: Ranked[] = ["/r/a.ts", "/r/b.ts", "/r/c.md"].map((path) => ({
  entry: { path, metadata: `about ${path}` },
  matched: ["x"],
  score: 0.5,
}));

describe("the model's choice of files (--llm-match)", () => {
  it("keeps candidate paths once each, orders them by the model's score, clamps scores and honours the limit", () => {
    const answer = `Sure!\n\`\`\`json\n${JSON.stringify([
      { path: "/r/c.md", relevance: "docs", score: 0.4 },
      { path: "/r/b.ts", relevance: "code", score: 1.7 },
      { path: "/elsewhere.ts", relevance: "made up", score: 0.99 },
      { path: "/r/c.md", relevance: "again", score: 0.9 },
      { path: "/r/a.ts" },
    ])}\n\`\`\``;
    expect(parseChoice(answer, candidates, 10)).toEqual({
      ok: true,
      matches: [
        { path: "/r/b.ts", relevance: "code", score: 1 },
        { path: "/r/c.md", relevance: "docs", score: 0.4 },
        { path: "/r/a.ts", relevance: "chosen by the model: about /r/a.ts" },
      ],
    });
    expect(parseChoice(answer, candidates, 1)).toEqual({ ok: true, matches: [{ path: "/r/b.ts", relevance: "code", score: 1 }] });
  });

  it("accepts an empty choice and names what makes an answer unusable", () => {
    expect(parseChoice("[]", candidates, 5)).toEqual({ ok: true, matches: [] });
    expect(parseChoice("the parser", candidates, 5)).toEqual({ ok: false, reason: "the answer holds no JSON array" });
    expect(parseChoice("[{path: 1}]", candidates, 5)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^the answer is not valid JSON/),
    });
    expect(parseChoice('[{"file": "/r/a.ts"}]', candidates, 5)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^the answer is not an array of \{path, relevance, score\}/),
    });
    expect(parseChoice('[{"path": "/nope.ts", "score": 1}]', candidates, 5)).toEqual({
      ok: false,
      reason: "the answer names none of the candidate paths",
    });
  });
});

describe("descriptions written by the model (--summarize)", () => {
  it("keeps one clean line", () => {
    expect(cleanSummary("Description: Parses XML; builds nodes.\nMore text")).toBe("Parses XML, builds nodes.");
    expect(cleanSummary('\n\n"Loads the config."')).toBe("Loads the config.");
    expect(cleanSummary("- **Summary**: the bus")).toBe("the bus");
    expect(cleanSummary("```\n```")).toBeUndefined();
    expect(cleanSummary("x".repeat(500))).toHaveLength(240);
  });

  it("sends the file's head, capped, named relative to the directory", () => {
    const [system, user] = summaryPrompt({ relative: "src/a.ts", path: "/r/src/a.ts", text: "y".repeat(100), extracted: "" }, 10);
    expect(system?.content).toContain("one line");
    expect(user?.content).toBe(`File: src/a.ts (TypeScript)\n\n${"y".repeat(10)}\n[… truncated]`);
  });
});

describe("llmMatch configuration", () => {
  it("is off by default, on from DIRIGENT_LLM_MATCH or the flag, and a bad value is named", () => {
    expect(loadConfig({}, {}).llmMatch).toBe(false);
    expect(loadConfig({}, { DIRIGENT_LLM_MATCH: "yes" }).llmMatch).toBe(true);
    expect(loadConfig({ llmMatch: "true" }, { DIRIGENT_LLM_MATCH: "0" }).llmMatch).toBe(true);
    expect(() => loadConfig({}, { DIRIGENT_LLM_MATCH: "maybe" })).toThrow(/environment variable DIRIGENT_LLM_MATCH/);
  });
});
