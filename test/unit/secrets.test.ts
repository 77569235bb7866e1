import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createMasker, maskDeep } from "../../actors/secrets.js";
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
