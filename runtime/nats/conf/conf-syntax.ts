/** How a nats-server configuration file is written: strings as JSON strings, lists in brackets, a user's permissions. */

/** A string as the configuration file spells it. */
export const quote = (value: string): string => JSON.stringify(value);

/** A list of strings as the configuration file spells it: `["a", "b"]`. */
export const list = (items: readonly string[]): string => `[${items.map(quote).join(", ")}]`;

/** What one user may do: the subjects it may publish to and subscribe to (its `permissions: { ... }`). */
export interface RolePermissions {
  publish: string[];
  subscribe: string[];
}
