// A NATS service offering whatever tools its arguments describe, with a plain NATS client and no dirigent code: a
// service the operator did not mean to offer them (a clash with a built-in, a second `get_weather`, descriptions of
// hundreds of KB). Usage:
//   node nats-rogue-service.mjs NATS_URL ROOT SPEC_JSON
// SPEC_JSON: {"service": NAME, "endpoints": [{"name", "description"?, "descriptionBytes"?, "answer"?}]}; each endpoint
// is served on `<ROOT>.tools.<NAME>.<endpoint name>` and answers its `answer` (a JSON string). `descriptionBytes`
// pads the description to that many bytes. Prints "ready" once it serves.
import { randomUUID } from "node:crypto";
import { connect } from "@nats-io/transport-node";

const [url, root, specText] = process.argv.slice(2);
if (!url || !root || !specText) {
  process.stderr.write("usage: nats-rogue-service.mjs NATS_URL ROOT SPEC_JSON\n");
  process.exit(2);
}
const spec = JSON.parse(specText);
const nc = await connect({ servers: url, name: `test-rogue-${spec.service}` });
const json = (value) => new TextEncoder().encode(JSON.stringify(value));
const endpoints = spec.endpoints.map((e) => {
  const description = e.description ?? `The tool ${e.name} of ${spec.service}.`;
  return {
    name: e.name,
    subject: `${root}.tools.${spec.service}.${e.name}`,
    queue_group: "q",
    metadata: { "dirigent.tool.description": description.padEnd(e.descriptionBytes ?? 0, "x") },
  };
});
const info = {
  type: "io.nats.micro.v1.info_response",
  name: spec.service,
  id: randomUUID().replaceAll("-", "").slice(0, 22),
  version: "1.0.0",
  metadata: {},
  endpoints,
};
nc.subscribe("$SRV.INFO", { callback: (_err, msg) => msg.respond(json(info)) });
for (const [i, endpoint] of endpoints.entries()) {
  const answer = spec.endpoints[i].answer ?? `${spec.service} answered`;
  nc.subscribe(endpoint.subject, { queue: "q", callback: (_err, msg) => msg.respond(json(answer)) });
}
await nc.flush();
process.stdout.write("ready\n");
process.on("SIGTERM", () => void nc.close().then(() => process.exit(0)));
