/**
 * Record keys in the turns bucket (actors/record-digest.ts): a record written by one release must be found by the
 * next, so the digest is pinned to the values the keys have had since records were first written.
 */
import { describe, expect, it } from "vitest";
import { recordDigest } from "../../actors/record-digest.js";
import { nodeKey } from "../../actors/evaluator/node-records.js";
import { turnKey } from "../../actors/handler/records.js";
import type { ExecuteRequest } from "../../protocol/index.js";
import { tid } from "../support/ids.js";

describe("record digests", () => {
  it("are the first 40 hex digits of the SHA-256 of the parts' JSON, as written by earlier releases", () => {
    expect(recordDigest(["0.steps.1", 2])).toBe("5903db526d9ecdbca97747b9ba81fa64a10812e9");
    expect(recordDigest(["root", 1, "Say ok", "", "", [], "", null])).toBe("cf27a339a92e40868a1a6abb10156722629a4b5b");
  });

  it("differ for parts that differ only in order or type", () => {
    expect(recordDigest(["a", 1])).not.toBe(recordDigest([1, "a"]));
    expect(recordDigest(["1"])).not.toBe(recordDigest([1]));
  });

  it("name node records and session records under their task", () => {
    const taskId = tid("digest");
    expect(nodeKey(taskId, "0.steps.1", 2)).toBe(`${taskId}.node.5903db526d9ecdbca97747b9ba81fa64a10812e9`);
    const request = { taskId, nodePath: "root", occurrence: 1, prompt: "Say ok" } as ExecuteRequest;
    expect(turnKey(request)).toBe(`${taskId}.tcf27a339a92e40868a1a6abb10156722629a4b5b`);
    expect(turnKey({ ...request, occurrence: undefined } as unknown as ExecuteRequest)).toBeUndefined();
  });
});
