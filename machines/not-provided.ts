/** Placeholder for an effect that the actor shell must provide with `machine.provide(...)`. */
export function notProvided(name: string): never {
  throw new Error(`not provided: ${name}`);
}
