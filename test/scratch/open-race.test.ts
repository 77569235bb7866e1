import { describe, it, expect } from "vitest";
import { openNatsTransport } from "../../runtime/transport.js";
import { createSubjects } from "../../protocol/index.js";
import { silentLogger } from "../../actors/deps.js";
import { startTestNatsCluster } from "../support/nats-cluster.js";
import { randomRoot } from "../support/nats-server.js";

describe("open race", () => {
  it("opens concurrently", async () => {
    const cluster = await startTestNatsCluster(3);
    const failures: string[] = [];
    try {
      for (let round = 0; round < 15; round++) {
        const root = randomRoot();
        const subjects = createSubjects(root);
        const roleSets = [["director"], ["director"], ["evaluator"], ["handler"], ["handler"], ["memory"], ["director", "evaluator", "handler", "memory"], ["evaluator"]] as const;
        const results = await Promise.allSettled(
          roleSets.map((roles, i) =>
            openNatsTransport(cluster.urls[i % 3]!, subjects, { name: `p${i}`, log: silentLogger, roles: [...roles] as never, replicas: 3 }),
          ),
        );
        for (const r of results) {
          if (r.status === "rejected") failures.push(`round ${round}: ${String((r.reason as Error)?.stack ?? r.reason)}`);
          else await r.value.close();
        }
        console.log(`round ${round}: ${results.filter((r) => r.status === "rejected").length} failed`);
      }
    } finally {
      await cluster.stop();
    }
    console.log(failures.join("\n\n"));
    expect(failures).toEqual([]);
  }, 600_000);
});
