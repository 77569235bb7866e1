/**
 * nats-server configuration of a JetStream cluster (`dirigent nats-conf --cluster`): one file per node, naming every
 * node's route, so that the runtime's streams and buckets can be replicated (`DIRIGENT_REPLICAS=3`). Written for
 * nats-server 2.9: `server_name` per node, a `cluster` block with a name (JetStream needs it) and `routes`.
 */

/** One node of a cluster. */
export interface ClusterNode {
  /** `server_name`, unique in the cluster (JetStream's placement and leader reports name it). */
  readonly name: string;
  /** Address other nodes reach this node's route port at. */
  readonly host: string;
  /** Address the client and route ports listen on (`0.0.0.0` for remote nodes, loopback for local ones). */
  readonly listen: string;
  /** Client port. */
  readonly clientPort: number;
  /** Route (cluster) port. */
  readonly routePort: number;
  /** Monitoring port on 127.0.0.1; 0: none. */
  readonly monitorPort: number;
  /** JetStream store directory (absolute, or relative to the server's working directory). */
  readonly storeDir: string;
}

/** Options of {@link renderClusterNode}. */
export interface ClusterConfOptions {
  /** The cluster's name (`cluster.name`); the same on every node. */
  readonly clusterName: string;
  /** Every node of the cluster, this one included. */
  readonly nodes: readonly ClusterNode[];
  /** A file `include`d at the end (the accounts block of `dirigent nats-conf`, relative to the config file). */
  readonly include?: string;
  /** `max_payload`; default 2MB (prompts and model outputs can exceed the 1 MB default). */
  readonly maxPayload?: string;
}

/** The cluster name used when none is given. */
export const DEFAULT_CLUSTER_NAME = "dirigent";

/**
 * `n` nodes on this host: client ports `clientPort`, `clientPort + 1`, …, route ports from `routePort`, monitoring
 * ports from `monitorPort` (0: none), store directories `<dir>/<name>/jetstream`.
 */
export function localClusterNodes(
  n: number,
  options: { dir: string; clientPort?: number; routePort?: number; monitorPort?: number; clusterName?: string },
): ClusterNode[] {
  const { dir, clientPort = 4222, routePort = 6222, monitorPort = 8222 } = options;
  const prefix = options.clusterName ?? DEFAULT_CLUSTER_NAME;
  return Array.from({ length: n }, (_, i) => ({
    name: `${prefix}-${i + 1}`,
    host: "127.0.0.1",
    listen: "127.0.0.1",
    clientPort: clientPort + i,
    routePort: routePort + i,
    monitorPort: monitorPort === 0 ? 0 : monitorPort + i,
    storeDir: `${dir.replace(/\/+$/, "")}/${prefix}-${i + 1}/jetstream`,
  }));
}

/**
 * Nodes on other hosts from `host:routePort,host:routePort,…`: each listens on every interface, clients on
 * `clientPort`, monitoring on 127.0.0.1:8222, JetStream in `/var/lib/nats/jetstream`; named after the host's first label.
 * @throws {Error} for an entry that is not `host:port`, or a repeated one.
 */
export function remoteClusterNodes(spec: string, clientPort = 4222): ClusterNode[] {
  const entries = spec
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  const nodes = entries.map((entry) => {
    const m = /^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(entry);
    const port = Number(m?.[2]);
    if (!m?.[1] || !(port > 0 && port < 65536)) throw new Error(`'${entry}': expected host:route-port`);
    const host = m[1];
    return {
      name: /^[0-9.[]/.test(host) ? entry.replace(/[^A-Za-z0-9]+/g, "-") : (host.split(".")[0] ?? host),
      host,
      listen: "0.0.0.0",
      clientPort,
      routePort: port,
      monitorPort: 8222,
      storeDir: "/var/lib/nats/jetstream",
    };
  });
  const names = new Set(nodes.map((n) => n.name));
  if (names.size !== nodes.length) throw new Error(`'${spec}': every node needs a host of its own`);
  return nodes;
}

/** The config file of node `index` of `options.nodes`. */
export function renderClusterNode(options: ClusterConfOptions, index: number): string {
  const node = options.nodes[index];
  if (!node) throw new Error(`no node ${index} in a cluster of ${options.nodes.length}`);
  const routes = options.nodes.map((n) => `    "nats-route://${n.host}:${n.routePort}"`);
  return [
    `# nats-server ${node.name}: node ${index + 1} of ${options.nodes.length} of cluster '${options.clusterName}' (dirigent nats-conf --cluster)`,
    `server_name: ${JSON.stringify(node.name)}`,
    `listen: ${JSON.stringify(`${node.listen}:${node.clientPort}`)}`,
    ...(node.monitorPort > 0 ? [`http: ${JSON.stringify(`127.0.0.1:${node.monitorPort}`)}`] : []),
    `max_payload: ${options.maxPayload ?? "2MB"}`,
    "",
    "jetstream {",
    `  store_dir: ${JSON.stringify(node.storeDir)}`,
    "}",
    "",
    "cluster {",
    `  name: ${JSON.stringify(options.clusterName)}`,
    `  listen: ${JSON.stringify(`${node.listen}:${node.routePort}`)}`,
    "  # Routes carry no credentials here: reach the route ports only over a private network (or add TLS).",
    "  routes: [",
    ...routes,
    "  ]",
    "}",
    ...(options.include ? ["", `include ${JSON.stringify(options.include)}`] : []),
    "",
  ].join("\n");
}
