/**
 * What the effects of a machine provided once per role instance act for (a walk, a session), found by the actor
 * `system` XState passes to each of its actions and actors. A role creates one registry with the machine it provides,
 * so two roles (two systems in one process) never share one. A scope is registered around `createActor`, so the
 * machine's first transitions, which XState runs inside `createActor` (eventless ones and their actions included),
 * find it too.
 */
export interface ActorScopes<T> {
  /** Creates a root actor with `make` and registers `scope` for its system. */
  create<A extends { system: unknown }>(scope: T, make: () => A): A;
  /** The scope of the actor system `system`; throws `missing` when it has none. */
  of(system: unknown): T;
}

/** An {@link ActorScopes} registry, owned by whoever calls this; `missing` is the error's message for an actor created without a scope. */
export function actorScopes<T>(missing: string): ActorScopes<T> {
  // Weak: a finished actor system and its scope go together.
  const bySystem = new WeakMap<object, T>();
  // The scope of the actor being created: its system is not known before `createActor` returns.
  let creating: T | undefined;
  return {
    create(scope, make) {
      const outer = creating;
      creating = scope;
      let actor: ReturnType<typeof make>;
      try {
        actor = make();
      } finally {
        creating = outer;
      }
      bySystem.set(actor.system as object, scope);
      return actor;
    },
    of(system) {
      const scope = bySystem.get(system as object) ?? creating;
      if (scope === undefined) throw new Error(missing);
      return scope;
    },
  };
}
