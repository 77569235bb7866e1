/** The former name of {@link actorScopes}, kept for actors/director/task.ts until its rewrite; new code imports actor-scopes.ts. */
export { actorScopes as systemScope, type ActorScopes as SystemScope } from "./actor-scopes.js";
