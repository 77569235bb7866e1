import { describe, expect, it } from "vitest";
import { createActor, createMachine } from "xstate";
import { REDACTED, sanitize } from "../../runtime/inspect/sanitize.js";

describe("sanitize", () => {
  it("masks every key that names a secret, at any depth, whatever its value", () => {
    const input = {
      type: "config.loaded",
      apiKey: "sk-live-123",
      nested: { OPENAI_API_KEY: "sk-2", headers: { Authorization: "Bearer x", accept: "json" }, list: [{ password: { a: 1 } }] },
      accessToken: 42,
      clientSecret: null,
    };
    const out = sanitize(input);
    expect(out).toEqual({
      type: "config.loaded",
      apiKey: REDACTED,
      nested: { OPENAI_API_KEY: REDACTED, headers: { Authorization: REDACTED, accept: "json" }, list: [{ password: REDACTED }] },
      accessToken: REDACTED,
      clientSecret: REDACTED,
    });
    expect(JSON.stringify(out)).not.toMatch(/sk-|Bearer/);
    expect(input.apiKey).toBe("sk-live-123");
  });

  it("keeps token counts and ordinary words visible", () => {
    const usage = {
      tokens: 120,
      promptTokens: 100,
      completionTokens: 20,
      reportedTokens: 118,
      maxTokens: 4096,
      tokenBudget: 9000,
      keyword: "oslo",
    };
    expect(sanitize(usage)).toEqual(usage);
    expect(sanitize({ natsToken: "t", NATS_TOKEN: "t", apiKeys: ["k"], privateKey: "p", cookie: "c", credentials: {} })).toEqual({
      natsToken: REDACTED,
      NATS_TOKEN: REDACTED,
      apiKeys: REDACTED,
      privateKey: REDACTED,
      cookie: REDACTED,
      credentials: REDACTED,
    });
  });

  it("masks configured secret values wherever they appear in strings, error messages and keys, before cutting", () => {
    const secret = "sk-live-0123456789";
    const input = {
      inputs: { name: `Ada, key ${secret}` },
      messages: [{ role: "user", content: `use ${secret} twice: ${secret}` }],
      error: new Error(`401: incorrect API key provided: ${secret}`),
      [`by-${secret}`]: 1,
      long: `${"x".repeat(8)}${secret}`,
    };
    const out = sanitize(input, { secrets: [secret, "", "ab"], maxString: 12 });
    expect(JSON.stringify(out)).not.toContain(secret);
    expect(JSON.stringify(out)).not.toContain("sk-live");
    expect(sanitize(input, { secrets: [secret] })).toMatchObject({
      inputs: { name: `Ada, key ${REDACTED}` },
      messages: [{ content: `use ${REDACTED} twice: ${REDACTED}` }],
      error: { message: `401: incorrect API key provided: ${REDACTED}` },
      [`by-${REDACTED}`]: 1,
    });
    // Too short to search for: masking it would garble ordinary text.
    expect(sanitize({ note: "about" }, { secrets: ["ab"] })).toEqual({ note: "about" });
    // Regular-expression characters in a secret are taken literally.
    expect(sanitize({ p: "pa$$.w(rd)+x" }, { secrets: ["pa$$.w(rd)+"] })).toEqual({ p: `${REDACTED}x` });
  });

  it("truncates long strings and arrays and says how much was cut", () => {
    const out = sanitize({ text: "x".repeat(30), items: [1, 2, 3, 4, 5] }, { maxString: 10, maxArray: 2 });
    expect(out).toEqual({ text: "xxxxxxxxxx…(+20 chars)", items: [1, 2, "…(+3 items)"] });
  });

  it("keeps the result JSON-safe: cycles, depth, functions, errors, bigints and dates", () => {
    const cyclic: Record<string, unknown> = { name: "a" };
    cyclic["self"] = cyclic;
    const shared = { v: 1 };
    const out = sanitize(
      {
        cyclic,
        twice: [shared, shared],
        fn: () => 1,
        err: new TypeError("bad"),
        big: 10n,
        when: new Date(0),
        deep: { a: { b: { c: 1 } } },
      },
      { maxDepth: 3 },
    );
    expect(out).toEqual({
      cyclic: { name: "a", self: "[circular]" },
      twice: [{ v: 1 }, { v: 1 }],
      fn: "[function]",
      err: { name: "TypeError", message: "bad" },
      big: "10",
      when: "1970-01-01T00:00:00.000Z",
      deep: { a: { b: "[depth limit]" } },
    });
    expect(() => JSON.stringify(out)).not.toThrow();
  });

  it("sanitises an XState snapshot through its toJSON, masking secrets in context", () => {
    const machine = createMachine({
      id: "m",
      context: { apiKey: "sk-snap", note: "y".repeat(5000) },
      initial: "idle",
      states: { idle: {} },
    });
    const actor = createActor(machine).start();
    const out = sanitize(actor.getSnapshot());
    actor.stop();
    expect(out).toMatchObject({ value: "idle", status: "active", context: { apiKey: REDACTED } });
    expect(JSON.stringify(out)).not.toContain("sk-snap");
    expect(JSON.stringify(out)).toContain("…(+3000 chars)");
  });
});
