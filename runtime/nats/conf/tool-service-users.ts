/**
 * The NATS users of tool services (`dirigent nats-conf --tool-service <name>`, issue 31): each service receives only
 * its own endpoints' calls and answers only what it received. The runtime roles' users are in permissions.ts.
 */
import { createSubjects, DEFAULT_ROOT } from "../../../protocol/index.js";
import { list, quote, type RolePermissions } from "./conf-syntax.js";

/** What a tool service's name may be in `dirigent nats-conf --tool-service` (the NATS service protocol's names). */
export const TOOL_SERVICE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The NATS user of tool service `service` of root `root`: `tool-<service>` for the default root (`tool-weather`),
 * `<root>-tool-<service>` for any other.
 */
export function toolServiceUser(root: string, service: string): string {
  return root === DEFAULT_ROOT ? `tool-${service}` : `${root}-tool-${service}`;
}

/** The variable holding a tool service user's password: `DIRIGENT_NATS_TOOL_WEATHER_PASSWORD` (`…_ACME_TOOL_…` for root `acme`). */
export function toolServicePasswordVariable(root: string, service: string): string {
  return `DIRIGENT_NATS_${toolServiceUser(root, service).toUpperCase().replace(/[.-]/g, "_")}_PASSWORD`;
}

/**
 * How long a tool service may take to answer a call it received (`allow_responses.expires`): its one answer is refused
 * after that. Longer than any tool timeout a Handler is likely to set (`DIRIGENT_TOOL_TIMEOUT_MS`, 60 s by default).
 */
export const TOOL_ANSWER_WINDOW = "1h";

/**
 * The permissions of tool service `service` of root `root` (issue 31): it receives its own endpoints' calls
 * (`<root>.tools.<service>.>`, no other service's) and the discovery requests of the NATS service protocol, its own
 * by name (`$SRV.<verb>.<service>[.<id>]`) and those to every service (`$SRV.<verb>`); it publishes nothing but one
 * answer to each request it received (`allow_responses`), so it cannot answer a Handler's other requests, whatever it
 * guesses of their reply subjects.
 */
export function toolServicePermissions(root: string, service: string): RolePermissions {
  const s = createSubjects(root);
  return {
    publish: [],
    subscribe: [
      s.anyServiceDiscovery,
      s.serviceDiscoveryOf(service),
      s.serviceInstanceDiscoveryOf(service),
      s.toolServiceSubjects(service),
    ],
  };
}

/**
 * The entries of the `users = [...]` list for tool services `services` of root `root` (`dirigent nats-conf
 * --tool-service`), each with {@link toolServicePermissions}: publish nothing (`publish: { deny: ">" }`) but the answers
 * to what it received (`allow_responses`, one each within {@link TOOL_ANSWER_WINDOW}).
 * @throws {Error} for a service name that is not {@link TOOL_SERVICE_NAME}, or two whose password variables clash.
 */
export function renderToolServiceUsers(root: string, services: readonly string[]): string[] {
  const lines: string[] = [];
  const variables = new Map<string, string>();
  for (const service of services) {
    if (!TOOL_SERVICE_NAME.test(service))
      throw new Error(`tool service '${service}': a service name has 1 to 64 letters, digits, '-' and '_'`);
    const variable = toolServicePasswordVariable(root, service);
    const clash = variables.get(variable);
    if (clash !== undefined) throw new Error(`tool services '${clash}' and '${service}' would share the password variable ${variable}`);
    variables.set(variable, service);
    const user = toolServiceUser(root, service);
    const p = toolServicePermissions(root, service);
    lines.push(
      `    { user: ${quote(user)}, password: $${variable}, permissions: {`,
      `        publish: { deny: [">"] }`,
      `        subscribe: { allow: ${list(p.subscribe)} }`,
      `        allow_responses: { max: 1, expires: ${quote(TOOL_ANSWER_WINDOW)} }`,
      "    } }",
    );
  }
  return lines;
}
