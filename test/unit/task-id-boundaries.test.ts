/**
 * Where a task id comes in from outside as a plain string, it is checked once, there: the client's methods refuse an
 * illegal one before anything is sent, as its subject did before they checked it; the inspector server answers a path
 * with one 400, as a Director answers it (`INVALID_ID`).
 */
import { afterEach, describe, expect, it } from "vitest";
import { createSubjects, InvalidSubjectError } from "../../protocol/index.js";
import { DirigentClient, RemoteError } from "../../runtime/client.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";
import { startInspectServer, type InspectServer } from "../../runtime/inspect/server.js";

const subjects = createSubjects("ids");
let bus: MemoryBus | undefined;
let server: InspectServer | undefined;

afterEach(async () => {
  await server?.close();
  await bus?.close();
});

describe("the client", () => {
  it("refuses an illegal task id at each method's entry, before asking anything", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const client = new DirigentClient(bus, subjects, 200);
    const bad = "no spaces";
    expect(() => client.watch(bad)).toThrow(InvalidSubjectError);
    for (const call of [
      () => client.get(bad),
      () => client.cancel(bad),
      () => client.nodes(bad),
      () => client.node(bad, "0"),
      () => client.input(bad, "yes"),
      () => client.rerun(bad, { from: "0" }),
      () => client.run({ xml: "<task/>", taskId: bad }),
      () => client.runFork("t1", { from: "0", taskId: bad }),
    ])
      await expect(call()).rejects.toThrow(new InvalidSubjectError(`illegal task id token '${bad}'`, bad));
    // A legal one is asked: nobody answers here.
    await expect(client.get("t1")).rejects.toBeInstanceOf(RemoteError);
  });
});

describe("the inspector server", () => {
  it("answers a path with an illegal task id 400, and an unknown legal one 404", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    server = await startInspectServer({ bus, subjects, port: 0 });
    const base = server.url;
    for (const [path, method] of [
      ["/api/tasks/no%20spaces", "GET"],
      ["/api/tasks/no%20spaces/nodes", "GET"],
      ["/api/tasks/no%20spaces/node?path=0", "GET"],
      ["/api/tasks/no%20spaces/rerun", "POST"],
    ] as const) {
      const res = await fetch(new URL(path, base), {
        method,
        ...(method === "POST" ? { headers: { "content-type": "application/json" }, body: "{}" } : {}),
      });
      expect(res.status, path).toBe(400);
      expect(await res.json()).toEqual({ error: "task id 'no spaces': must be 1–64 characters of [A-Za-z0-9_-]", code: "INVALID_ID" });
    }
    expect((await fetch(new URL("/api/tasks/t1", base))).status).toBe(404);
  });
});
