import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createMasker, createStreamMasker, maskDeep, REDACTED } from "../../actors/secrets.js";
import { createLogger } from "../../runtime/logger.js";
import { hiddenPaths, scrubSecretEnv, secretValues } from "../../runtime/secrets.js";

describe("secret values", () => {
  it("are every secret the configuration names, the password file's too, and the creds file's JWT and seed", () => {
    const dir = mkdtempSync(join(tmpdir(), "dirigent-secret-values-"));
    try {
      writeFileSync(join(dir, "pass"), "file-password-1\nsecond line\n");
      const jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.payload.sig";
      const seed = "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4";
      writeFileSync(
        join(dir, "creds"),
        `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n************************* IMPORTANT *************************\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
      );
      const values = secretValues({
        openaiApiKey: "sk-abc-123456",
        natsToken: "token-xyz-1",
        natsPasswordFile: join(dir, "pass"),
        natsCreds: join(dir, "creds"),
      });
      expect(values).toEqual(["sk-abc-123456", "token-xyz-1", "file-password-1", jwt, seed]);
      expect(hiddenPaths({ natsPasswordFile: join(dir, "pass"), dataDir: join(dir, "nowhere") })).toEqual(
        [join(dir, "pass"), join(dir, "nowhere")].map((p) => p.replace(tmpdir(), realpathSync(tmpdir()))),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("are masked in strings, nested values and keys, leaving other values as they are", () => {
    const mask = createMasker(["sk-live-123456", "short"]);
    expect(mask("key sk-live-123456 and short")).toBe("key [redacted] and short");
    const value = { a: ["x sk-live-123456"], b: 1, c: { "sk-live-123456": true } };
    expect(maskDeep(value, mask)).toEqual({ a: ["x [redacted]"], b: 1, c: { "[redacted]": true } });
    const clean = { a: ["nothing"], n: 2 };
    expect(maskDeep(clean, mask)).toBe(clean);
  });

  it("leave the environment once the configuration is read", () => {
    const env: NodeJS.ProcessEnv = { OPENAI_API_KEY: "sk-1", NATS_PASSWORD: "p", NATS_TOKEN: "t", NATS_USER: "handler", PATH: "/usr/bin" };
    scrubSecretEnv(env);
    expect(env).toEqual({ NATS_USER: "handler", PATH: "/usr/bin" });
  });

  it("are masked in every log line: message, fields and errors", () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, done) => void (lines.push(String(chunk)), done()) });
    const log = createLogger("info", "test", ["sk-log-secret-1"], sink);
    log.info({ output: "got sk-log-secret-1", nested: { deep: ["sk-log-secret-1"] } }, "message with sk-log-secret-1");
    log.error({ err: new Error("401 for sk-log-secret-1") }, "failed");
    expect(lines).toHaveLength(2);
    expect(lines.join("")).not.toContain("sk-log-secret-1");
    expect(lines[0]).toContain("message with [redacted]");
    expect(lines[0]).toContain('"output":"got [redacted]"');
    expect(lines[1]).toContain("401 for [redacted]");
  });
});

/** The pieces a stream masker sends for `pieces`, the held tail included. */
function streamed(secrets: readonly string[], pieces: readonly string[]): string[] {
  const masker = createStreamMasker(secrets);
  return [...pieces.map((p) => masker.push(p)), masker.end()];
}

/** Every way of cutting `text` into pieces at up to two split points. */
function splits(text: string): string[][] {
  const out: string[][] = [[text]];
  for (let i = 1; i < text.length; i++) {
    out.push([text.slice(0, i), text.slice(i)]);
    for (let j = i + 1; j < text.length; j++) out.push([text.slice(0, i), text.slice(i, j), text.slice(j)]);
  }
  return out;
}

describe("a streamed text", () => {
  const secret = "sk-live-SECRET42";

  it("masks a secret split at every point, in two pieces or one character at a time", () => {
    const text = `the key is ${secret}, keep it`;
    const whole = createMasker([secret])(text);
    expect(whole).toBe(`the key is ${REDACTED}, keep it`);
    for (let at = 1; at < secret.length; at++) {
      const pieces = [`the key is ${secret.slice(0, at)}`, `${secret.slice(at)}, keep it`];
      const sent = streamed([secret], pieces);
      expect(sent.join(""), `split after ${at} characters`).toBe(whole);
      for (const piece of sent) expect(piece).not.toContain(secret.slice(0, Math.max(at, 2)));
    }
    const byCharacter = streamed([secret], [...text]);
    expect(byCharacter.join("")).toBe(whole);
    expect(byCharacter.join("")).not.toContain(secret);
  });

  it("holds back only a tail that could still become a secret, and sends it when the stream ends", () => {
    const masker = createStreamMasker([secret]);
    expect(masker.push("plain words ")).toBe("plain words ");
    expect(masker.push("then sk-li")).toBe("then ");
    expect(masker.push("ve-")).toBe("");
    // Not the secret after all: what was held goes out with the piece that decided it.
    expect(masker.push("X and sk")).toBe("sk-live-X and ");
    expect(masker.end()).toBe("sk");
    expect(masker.end()).toBe("");
  });

  it("sends exactly what masking the whole text gives, at every split, with overlapping and nested secrets", () => {
    const secrets = ["abcabd", "abcabdxy", "cabdab", "aaaaaa"];
    const mask = createMasker(secrets);
    const texts = ["xabcabdxyz", "abcabcabdab", "aaaaaaaaab", "zcabdabcabd", "abcabdx", "aaaaa", "abcab"];
    for (const text of texts)
      for (const pieces of splits(text)) {
        const sent = streamed(secrets, pieces);
        expect(sent.join(""), JSON.stringify(pieces)).toBe(mask(text));
        for (const secretValue of secrets) expect(sent.join("")).not.toContain(secretValue);
      }
  });

  it("passes pieces through untouched when the process knows no secret", () => {
    const masker = createStreamMasker(["short"]);
    expect(masker.push("sk-live-")).toBe("sk-live-");
    expect(masker.end()).toBe("");
  });
});
