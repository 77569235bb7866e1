import { describe, expect, it } from "vitest";
import { createParseCache } from "../../../machines/language/parse-cache.js";

const xml = (n: number) => `<task><description>task ${n}</description></task>`;

describe("createParseCache", () => {
  it("answers the same text with the same frozen document, and keeps nothing across caches", () => {
    const cache = createParseCache();
    const first = cache.parse(xml(1));
    expect(first.ok).toBe(true);
    expect(cache.parse(xml(1))).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    if (first.ok) expect(Object.isFrozen(first.document)).toBe(true);
    // Another system's cache parses for itself.
    expect(createParseCache().parse(xml(1))).not.toBe(first);
  });

  it("keeps at most 64 templates, the oldest dropped first, and never a failed parse", () => {
    const cache = createParseCache();
    const oldest = cache.parse(xml(0));
    for (let i = 1; i <= 64; i++) cache.parse(xml(i));
    expect(cache.parse(xml(64))).toBe(cache.parse(xml(64)));
    expect(cache.parse(xml(0))).not.toBe(oldest);
    const bad = "<task><description>x</descr></task>";
    expect(cache.parse(bad).ok).toBe(false);
    expect(cache.parse(bad)).not.toBe(cache.parse(bad));
  });

  it("does not keep a text longer than 16 KiB", () => {
    const cache = createParseCache();
    const long = `<task><description>${"x".repeat(17 * 1024)}</description></task>`;
    expect(cache.parse(long)).not.toBe(cache.parse(long));
  });
});
