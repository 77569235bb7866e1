// A NATS service that speaks only the NATS service (micro) protocol v1, with a plain NATS client and no dirigent
// code: what a tool written in any language looks like to the Handler. Usage:
//   node nats-tool-service.mjs NATS_URL ROOT
// Prints "ready" once it serves. The service `weather`, each endpoint on `<ROOT>.tools.weather.<name>`:
// `get_weather` (answers), `lookup_stock` (always a service error), `wait_forever` (never answers), `stats` (no tool
// metadata: not a tool), `bad_schema` (tool metadata with an unusable schema: left out).
import { randomUUID } from "node:crypto";
import { connect, headers } from "@nats-io/transport-node";

const [url, root] = process.argv.slice(2);
if (!url || !root) {
  process.stderr.write("usage: nats-tool-service.mjs NATS_URL ROOT\n");
  process.exit(2);
}
const nc = await connect({ servers: url, name: "test-tool-service" });
const id = randomUUID().replaceAll("-", "").slice(0, 22);
const service = { name: "weather", id, version: "1.0.0", metadata: {} };
const endpoints = [
  {
    name: "get_weather",
    subject: `${root}.tools.weather.get_weather`,
    queue_group: "q",
    metadata: {
      "dirigent.tool.description": "The weather forecast of a city.",
      "dirigent.tool.parameters": JSON.stringify({
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      }),
      "dirigent.tool.idempotent": "true",
    },
  },
  {
    name: "lookup_stock",
    subject: `${root}.tools.weather.lookup_stock`,
    queue_group: "q",
    metadata: { "dirigent.tool.description": "The stock of an item." },
  },
  {
    name: "wait_forever",
    subject: `${root}.tools.weather.wait_forever`,
    queue_group: "q",
    metadata: { "dirigent.tool.description": "Never answers." },
  },
  { name: "stats", subject: `${root}.tools.weather.stats`, queue_group: "q", metadata: {} },
  {
    name: "bad_schema",
    subject: `${root}.tools.weather.bad_schema`,
    queue_group: "q",
    metadata: { "dirigent.tool.description": "Left out.", "dirigent.tool.parameters": "{not json" },
  },
];
const json = (value) => new TextEncoder().encode(JSON.stringify(value));

// Asked by every Handler (`$SRV.INFO`) and by those whose allowlist names it (`$SRV.INFO.weather`).
for (const subject of ["$SRV.INFO", "$SRV.INFO.weather"])
  nc.subscribe(subject, {
    callback: (_err, msg) =>
      msg.respond(json({ type: "io.nats.micro.v1.info_response", ...service, description: "Weather and stock", endpoints })),
  });
nc.subscribe("$SRV.PING", { callback: (_err, msg) => msg.respond(json({ type: "io.nats.micro.v1.ping_response", ...service })) });
nc.subscribe(`${root}.tools.weather.get_weather`, {
  queue: "q",
  callback: (_err, msg) => {
    const { city } = JSON.parse(new TextDecoder().decode(msg.data));
    msg.respond(json({ city, forecast: "sunny", celsius: 21 }));
  },
});
nc.subscribe(`${root}.tools.weather.lookup_stock`, {
  queue: "q",
  callback: (_err, msg) => {
    const h = headers();
    h.set("Nats-Service-Error", "the stock database is down");
    h.set("Nats-Service-Error-Code", "503");
    msg.respond(new Uint8Array(0), { headers: h });
  },
});
nc.subscribe(`${root}.tools.weather.wait_forever`, { queue: "q", callback: () => {} });
nc.subscribe(`${root}.tools.weather.stats`, { queue: "q", callback: (_err, msg) => msg.respond(json({ calls: 0 })) });
await nc.flush();
process.stdout.write("ready\n");
process.on("SIGTERM", () => void nc.close().then(() => process.exit(0)));
