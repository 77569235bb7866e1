/**
 * The model of the user-level bench: a minimal OpenAI-compatible chat-completions server that answers every
 * `POST …/chat/completions` at once with the same one-word completion (non-streaming), in its own process so that
 * its CPU is in neither measured process. Not `dirigent mock-llm`: that one validates every request against its
 * schema and keeps every request body for assertions, work a real model server does not do for the runtimes under
 * test. Prints `listening <port>` once it accepts connections. `GET …/first-request` answers the body of the first
 * completion request it served (the bench's floor rows send the same request again).
 */
import { createServer } from "node:http";

const started = Math.floor(Date.now() / 1000);
let served = 0;

/** The first chat-completions request's body, for the bench's floor rows (`GET /first-request`); no other is kept. */
let first;

const server = createServer((req, res) => {
  // The body is read to its end (as a server must, to keep the connection alive) and not parsed.
  const keep = first === undefined && req.method === "POST" && req.url?.endsWith("/chat/completions");
  const chunks = [];
  req.on("data", (chunk) => keep && chunks.push(chunk));
  req.on("end", () => {
    if (req.method === "GET" && req.url?.endsWith("/first-request")) {
      res.writeHead(first === undefined ? 404 : 200, { "content-type": "application/json" });
      res.end(first ?? "{}");
      return;
    }
    if (req.method === "POST" && req.url?.endsWith("/chat/completions")) {
      if (keep && first === undefined) first = Buffer.concat(chunks).toString();
      served++;
      const body = JSON.stringify({
        id: `chatcmpl-bench-${served}`,
        object: "chat.completion",
        created: started,
        model: "bench-model",
        choices: [{ index: 0, message: { role: "assistant", content: "ok", refusal: null }, finish_reason: "stop", logprobs: null }],
        usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 },
      });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    if (req.method === "GET" && req.url?.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "bench-model", object: "model", created: started, owned_by: "bench" }] }));
      return;
    }
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }));
  });
});
// Clients keep their connections between calls; the server must not close them first.
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === "object" && address ? address.port : 0}\n`);
});
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
