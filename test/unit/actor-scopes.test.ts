import { describe, expect, it } from "vitest";
import { assign, createActor, setup } from "xstate";
import { actorScopes } from "../../actors/actor-scopes.js";

/** A machine whose first, eventless transition runs an action that needs its scope. */
const machine = setup({ actions: { read: assign({ seen: () => "" }) } }).createMachine({
  context: { seen: "" },
  initial: "reading",
  states: { reading: { entry: "read", always: "done" }, done: { type: "final" } },
});

describe("actorScopes", () => {
  it("gives each actor system its own scope, already during the transitions createActor runs", () => {
    const scopes = actorScopes<string>("no scope");
    const provided = machine.provide({ actions: { read: assign({ seen: ({ system }) => scopes.of(system) }) } });
    const a = scopes.create("a", () => createActor(provided));
    const b = scopes.create("b", () => createActor(provided));
    expect(a.getSnapshot().context.seen).toBe("a");
    expect(b.getSnapshot().context.seen).toBe("b");
    // After creation the scope is found by the system.
    expect(scopes.of(a.system)).toBe("a");
    expect(scopes.of(b.system)).toBe("b");
  });

  it("throws its message for an actor created without a scope", () => {
    const scopes = actorScopes<string>("a test actor runs without its scope");
    const actor = createActor(machine);
    expect(() => scopes.of(actor.system)).toThrow("a test actor runs without its scope");
  });

  it("does not leave a scope behind when creating the actor throws", () => {
    const scopes = actorScopes<string>("none");
    expect(() =>
      scopes.create("lost", () => {
        throw new Error("boom");
      }),
    ).toThrow("boom");
    expect(() => scopes.of({})).toThrow("none");
  });
});
