/**
 * Which NATS service endpoints the Handler offers (runtime/tools/nats-services.ts `toolsOfInfo`, issue 31 finding 3):
 * each service only on its own subjects (`<root>.tools.<service>.`), and with an allowlist only the services and tools
 * it names, each read from the answers to its own discovery subject (`$SRV.INFO.<service>`).
 */
import { describe, expect, it } from "vitest";
import { createSubjects } from "../../../protocol/index.js";
import { ConfigError, loadConfig } from "../../../runtime/config.js";
import { allowlistOf, toolsOfInfo, type InfoAnswer } from "../../../runtime/tools/nats-services.js";

const subjects = createSubjects("acme");
const encoder = new TextEncoder();

/** A service's `$SRV.INFO` answer offering `tools` (name → subject, description). */
function info(service: string, tools: Record<string, { subject?: string; description?: string }>): Uint8Array {
  const endpoints = Object.entries(tools).map(([name, t]) => ({
    name,
    subject: t.subject ?? `acme.tools.${service}.${name}`,
    metadata: { "dirigent.tool.description": t.description ?? `${name} of ${service}` },
  }));
  return encoder.encode(JSON.stringify({ type: "io.nats.micro.v1.info_response", name: service, id: "1", version: "1.0.0", endpoints }));
}
const offered = (found: ReturnType<typeof toolsOfInfo>["found"]) => found.map((f) => [f.name, f.service, f.subject, f.description]);

describe("NATS service tools", () => {
  it("are offered only on their own service's subjects", () => {
    const { found, problems } = toolsOfInfo(
      [
        info("weather", { get_weather: {}, get_time: { subject: "acme.tools.clock.get_time" }, flat: { subject: "acme.tools.flat" } }),
        info("bad.name", { dotted: { subject: "acme.tools.bad.name.dotted" } }),
      ],
      subjects,
    );
    expect(offered(found)).toEqual([["get_weather", "weather", "acme.tools.weather.get_weather", "get_weather of weather"]]);
    expect(problems).toEqual([
      "NATS service 'weather': endpoint 'get_time' left out: its subject 'acme.tools.clock.get_time' is not under 'acme.tools.weather.>' (its service's own subjects)",
      "NATS service 'weather': endpoint 'flat' left out: its subject 'acme.tools.flat' is not under 'acme.tools.weather.>' (its service's own subjects)",
      "NATS service 'bad.name': endpoint 'dotted' left out: the service's name does not match ^[A-Za-z0-9_-]{1,64}$",
    ]);
  });

  it("with an allowlist: only the services and tools it names, each described by its own discovery subject's answers", () => {
    const allow = allowlistOf(["weather/get_weather", "calc/*"]);
    const answers: InfoAnswer[] = [
      // To $SRV.INFO: any service can answer it, under any name.
      { data: info("weather", { get_weather: { description: "POISONED" }, delete_all: {} }) },
      { data: info("spare", { spare_tool: {} }) },
      { data: info("spare", { spare_tool: {} }) },
      { data: info("calc", { add: {} }) },
      // Another root's service: not told.
      { data: info("other", { x: { subject: "globex.tools.other.x" } }) },
      // To $SRV.INFO.<service>: only that service's user receives it.
      { data: info("weather", { get_weather: {}, get_forecast: {} }), asked: "weather" },
      { data: info("calc", { add: {}, mul: {} }), asked: "calc" },
      { data: info("weather", { mul: { description: "calc's, answered as weather" } }), asked: "calc" },
    ];
    const { found, problems } = toolsOfInfo(answers, subjects, new Map(), allow);
    expect(offered(found)).toEqual([
      ["add", "calc", "acme.tools.calc.add", "add of calc"],
      ["get_weather", "weather", "acme.tools.weather.get_weather", "get_weather of weather"],
      ["mul", "calc", "acme.tools.calc.mul", "mul of calc"],
    ]);
    expect(problems).toEqual([
      "NATS service 'spare' not offered: it is not in DIRIGENT_NATS_TOOL_ALLOW",
      "NATS service 'weather': endpoint 'get_forecast' left out: it is not in DIRIGENT_NATS_TOOL_ALLOW",
    ]);
  });

  it("read an allowlist's entries by service, `*` taking every tool", () => {
    expect(allowlistOf(["a/x", "a/y", "b/*", "b/z", "c/q", "c/*"])).toEqual(
      new Map<string, unknown>([
        ["a", new Set(["x", "y"])],
        ["b", "*"],
        ["c", "*"],
      ]),
    );
  });

  it("come from DIRIGENT_NATS_TOOL_ALLOW, whose entries are checked at start", () => {
    expect(loadConfig({}, { DIRIGENT_NATS_TOOL_ALLOW: "weather/get_weather, calc/*" }).natsToolAllow).toEqual([
      "weather/get_weather",
      "calc/*",
    ]);
    expect(loadConfig({}, {}).natsToolAllow).toEqual([]);
    for (const bad of ["weather", "weather/", "a.b/x", "weather/get_*"])
      expect(() => loadConfig({}, { DIRIGENT_NATS_TOOL_ALLOW: bad })).toThrow(ConfigError);
  });
});
