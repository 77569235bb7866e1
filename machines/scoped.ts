/**
 * What a machine whose effects a role provides once (building a machine is costly) carries to those effects: the key
 * of the scope they act for (a node of an Evaluator's walk, a Handler session), in a map the role owns. Plain text in
 * the context and in each effect's input, so the scope itself (its functions, its secrets) never enters a snapshot or
 * an inspection event. Absent: effects outside a role (the machines' unit tests) have no scope.
 */
export interface Scoped {
  scopeKey?: string | undefined;
}
