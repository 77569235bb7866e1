/** `dirigent nats-conf --cluster`: node configs of a cluster, and `--replicas` in the configuration. */
import { describe, expect, it } from "vitest";
import { localClusterNodes, remoteClusterNodes, renderClusterNode } from "../../runtime/nats/conf/cluster-conf.js";
import { ConfigError, loadConfig } from "../../runtime/config.js";

describe("cluster node configs", () => {
  it("names every node's route in each file, with the node's own name, ports and store", () => {
    const nodes = localClusterNodes(3, { dir: "/tmp/c/", clusterName: "dc" });
    expect(nodes.map((n) => [n.name, n.clientPort, n.routePort, n.monitorPort, n.storeDir])).toEqual([
      ["dc-1", 4222, 6222, 8222, "/tmp/c/dc-1/jetstream"],
      ["dc-2", 4223, 6223, 8223, "/tmp/c/dc-2/jetstream"],
      ["dc-3", 4224, 6224, 8224, "/tmp/c/dc-3/jetstream"],
    ]);
    const conf = renderClusterNode({ clusterName: "dc", nodes, include: "dirigent-auth.conf" }, 1);
    expect(conf).toContain('server_name: "dc-2"');
    expect(conf).toContain('listen: "127.0.0.1:4223"');
    expect(conf).toContain('store_dir: "/tmp/c/dc-2/jetstream"');
    expect(conf).toContain('  name: "dc"\n  listen: "127.0.0.1:6223"');
    for (const port of [6222, 6223, 6224]) expect(conf).toContain(`"nats-route://127.0.0.1:${port}"`);
    expect(conf.trimEnd().endsWith('include "dirigent-auth.conf"')).toBe(true);
  });

  it("reads remote nodes as host:route-port and refuses anything else", () => {
    const nodes = remoteClusterNodes("nats1.internal:6222, nats2.internal:6222,nats3.internal:7222");
    expect(nodes.map((n) => [n.name, n.host, n.listen, n.clientPort, n.routePort])).toEqual([
      ["nats1", "nats1.internal", "0.0.0.0", 4222, 6222],
      ["nats2", "nats2.internal", "0.0.0.0", 4222, 6222],
      ["nats3", "nats3.internal", "0.0.0.0", 4222, 7222],
    ]);
    expect(() => remoteClusterNodes("nats1.internal")).toThrow(/expected host:route-port/);
    expect(() => remoteClusterNodes("a.x:1,a.y:2")).toThrow(/a host of its own/);
  });
});

describe("--replicas / DIRIGENT_REPLICAS", () => {
  it("takes 1, 3 or 5, and refuses others naming the variable or flag", () => {
    expect(loadConfig({}, {}).replicas).toBe(1);
    expect(loadConfig({}, { DIRIGENT_REPLICAS: "3" }).replicas).toBe(3);
    expect(loadConfig({ replicas: "5" }, {}).replicas).toBe(5);
    expect(() => loadConfig({}, { DIRIGENT_REPLICAS: "2" })).toThrow(ConfigError);
    expect(() => loadConfig({}, { DIRIGENT_REPLICAS: "2" })).toThrow(/DIRIGENT_REPLICAS: must be 1, 3 or 5/);
    expect(() => loadConfig({ replicas: "7" }, {})).toThrow(/flag --replicas: must be 1, 3 or 5/);
    expect(loadConfig({}, { DIRIGENT_SCALE_STREAMS: "1" }).scaleStreams).toBe(true);
    expect(loadConfig({}, {}).scaleStreams).toBe(false);
  });
});
