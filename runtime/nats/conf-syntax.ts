/** How values are written in a nats-server configuration file: strings as JSON strings, lists in brackets. */

/** A string as the configuration file spells it. */
export const quote = (value: string): string => JSON.stringify(value);

/** A list of strings as the configuration file spells it: `["a", "b"]`. */
export const list = (items: readonly string[]): string => `[${items.map(quote).join(", ")}]`;
