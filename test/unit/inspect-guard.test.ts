/** The inspector servers' Host and Origin rules (runtime/inspect/guard.ts). */
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { allowedHosts, isLoopback, isLoopbackOrigin, parseAllowedHost, refusal } from "../../runtime/inspect/guard.js";

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe("allowed hosts", () => {
  it("answers the loopback names with the port when bound to loopback or every interface, the address itself otherwise", () => {
    expect([...allowedHosts("127.0.0.1", 4280)].sort()).toEqual(["127.0.0.1:4280", "[::1]:4280", "localhost:4280"]);
    expect([...allowedHosts("::1", 4280)].sort()).toEqual(["127.0.0.1:4280", "[::1]:4280", "localhost:4280"]);
    expect([...allowedHosts("0.0.0.0", 80, ["inspect.example"])].sort()).toEqual([
      "127.0.0.1:80",
      "[::1]:80",
      "inspect.example",
      "inspect.example:80",
      "localhost:80",
    ]);
    expect([...allowedHosts("192.168.1.5", 4280, ["Proxy.Example:443"])].sort()).toEqual(["192.168.1.5:4280", "proxy.example:443"]);
    expect([...allowedHosts("fe80::1", 4280)]).toEqual(["[fe80::1]:4280"]);
  });

  it("validates operator-given names, naming the problem", () => {
    expect(parseAllowedHost(" Inspect.Example ")).toBe("inspect.example");
    expect(parseAllowedHost("10.0.0.2:8080")).toBe("10.0.0.2:8080");
    expect(parseAllowedHost("[::1]:8080")).toBe("[::1]:8080");
    expect(() => parseAllowedHost("https://x.example")).toThrow("allowed host 'https://x.example': expected NAME or NAME:PORT");
    expect(() => parseAllowedHost("*.example")).toThrow("not a valid host name");
    expect(() => parseAllowedHost("-bad.example")).toThrow("not a valid host name");
    expect(() => parseAllowedHost("x.example:0")).toThrow("port 0 out of range");
    expect(() => parseAllowedHost("[1::2::3]")).toThrow("not an IPv6 address");
  });

  it("tells loopback interfaces and origins", () => {
    for (const a of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]) expect(isLoopback(a), a).toBe(true);
    for (const a of ["0.0.0.0", "10.0.0.1", "::", "example.com", "128.0.0.1"]) expect(isLoopback(a), a).toBe(false);
    for (const o of ["http://localhost", "http://127.0.0.1:5173", "https://[::1]:8443"]) expect(isLoopbackOrigin(o), o).toBe(true);
    for (const o of ["http://localhost.attacker.example", "http://127.0.0.1.nip.io", "null", "file://"])
      expect(isLoopbackOrigin(o), o).toBe(false);
  });
});

describe("refusal", () => {
  const hosts = allowedHosts("127.0.0.1", 4280);
  it("refuses a missing or foreign Host with 421, a foreign Origin with 403, and accepts the server's own origin", () => {
    expect(refusal(req({ host: "localhost:4280" }), hosts)).toBeUndefined();
    expect(refusal(req({}), hosts)?.status).toBe(421);
    expect(refusal(req({ host: "evil.example:4280" }), hosts)?.status).toBe(421);
    expect(refusal(req({ host: "localhost:4280", origin: "http://localhost:4280" }), hosts)).toBeUndefined();
    expect(refusal(req({ host: "localhost:4280", origin: "http://127.0.0.1:4280" }), hosts)?.status).toBe(403);
    expect(
      refusal(req({ host: "localhost:4280", origin: "https://stately.ai" }), hosts, (o) => o === "https://stately.ai"),
    ).toBeUndefined();
  });
});
