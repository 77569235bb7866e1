/** The HTTP endpoint Prometheus scrapes: `GET /metrics` in the text exposition format; anything else is 404. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import type { Logger } from "../../actors/deps.js";
import { messageOf } from "../../protocol/index.js";

/** A running metrics endpoint. */
export interface MetricsServer {
  /** `http://host:port/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/** Serves `registry` on `host:port` (0: a free port). */
export async function startMetricsServer(registry: Registry, host: string, port: number, log: Logger): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://metrics").pathname;
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: GET /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: unknown) => {
        log.error({ err: messageOf(err) }, "metrics collection failed");
        res.writeHead(500, { "content-type": "text/plain" }).end("metrics collection failed\n");
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // The endpoint never keeps a process alive by itself (a process whose start failed after it still exits).
  server.unref();
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
