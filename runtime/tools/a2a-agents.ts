/**
 * Remote A2A agents as tools: the `a2aAgents` section of the tool configuration (`--mcp-config FILE`), beside
 * `mcpServers`: `{"a2aAgents": {"NAME": {"url", "headers"}}}`. Each skill on an agent's card becomes a tool
 * `AGENT__SKILL` taking `text` (the message) and optional `inputs` (a data part), called with the A2A SDK's client;
 * the answer is the task's artifacts as text. `${VAR}` in `headers` is replaced by the Handler's environment variable.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { Role, TaskState, type Message, type Part, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from "@a2a-js/sdk/client";
import type { Logger } from "../../actors/deps.js";
import { silentLogger } from "../../actors/deps.js";
import { messageOf } from "../../protocol/errors.js";
import { mcpToolName } from "./mcp.js";
import { ToolSourceError, type ToolSource, type ToolSpec } from "./source.js";

/** One remote agent. */
export const A2aAgent = z.object({
  /** The agent's base URL; its card is at `/.well-known/agent-card.json`. */
  url: z.url({ protocol: /^https?$/ }),
  /** Headers of every request (an `Authorization` token, with `${VAR}` from the environment). */
  headers: z.record(z.string(), z.string()).default({}),
  timeoutMs: z.int().positive().optional(),
  maxResultBytes: z.int().positive().optional(),
  disabled: z.boolean().optional(),
});
export type A2aAgent = z.infer<typeof A2aAgent>;

/** The agents of a configuration, and the values taken from the environment (masked in every answer). */
export interface A2aAgents {
  agents: Record<string, A2aAgent>;
  secrets: string[];
}

/**
 * The `a2aAgents` of a configuration file (none when it has no such section).
 * @throws {ToolSourceError} naming the file and the key of each problem.
 */
export async function loadA2aAgents(file: string, env: NodeJS.ProcessEnv = process.env): Promise<A2aAgents> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new ToolSourceError(`tool configuration ${file}: ${messageOf(err)}`);
  }
  const section = typeof raw === "object" && raw !== null ? Reflect.get(raw, "a2aAgents") : undefined;
  if (section === undefined) return { agents: {}, secrets: [] };
  const parsed = z.record(z.string().min(1), A2aAgent).safeParse(section);
  if (!parsed.success)
    throw new ToolSourceError(
      `tool configuration ${file}: ${parsed.error.issues.map((i) => `a2aAgents.${i.path.map(String).join(".")}: ${i.message}`).join("; ")}`,
    );
  const problems: string[] = [];
  const secrets: string[] = [];
  const agents: Record<string, A2aAgent> = {};
  for (const [name, agent] of Object.entries(parsed.data)) {
    if (agent.disabled) continue;
    const headers = Object.fromEntries(
      Object.entries(agent.headers).map(([k, v]) => [
        k,
        v.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, variable: string) => {
          const value = env[variable];
          if (value === undefined) problems.push(`a2aAgents.${name}.headers.${k}: the environment variable ${variable} is not set`);
          else secrets.push(value);
          return value ?? "";
        }),
      ]),
    );
    agents[name] = { ...agent, headers };
  }
  if (problems.length > 0) throw new ToolSourceError(`tool configuration ${file}: ${problems.join("; ")}`);
  return { agents, secrets };
}

const PARAMETERS = {
  type: "object",
  properties: {
    text: { type: "string", description: "the message to the agent" },
    inputs: { type: "object", description: "structured inputs, sent as a data part" },
  },
  required: ["text"],
  additionalProperties: false,
};

const textPart = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

const partText = (p: Part): string =>
  p.content?.$case === "text" ? p.content.value : p.content?.$case === "data" ? JSON.stringify(p.content.value) : "";

/** The answer of an agent for the model: the task's artifacts, or its status message; an unfinished task as an error. */
export function taskAnswer(result: Message | Task): string {
  if (!("status" in result)) return result.parts.map(partText).join("\n");
  const said = result.status?.message?.parts.map(partText).join("\n") ?? "";
  const state = result.status?.state;
  if (state === TaskState.TASK_STATE_COMPLETED) {
    const artifacts = result.artifacts.flatMap((a) => a.parts.filter((p) => p.content?.$case === "text").map(partText)).join("\n");
    return artifacts || said;
  }
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED) return `error: the agent asks for input, which a tool call cannot give: ${said}`;
  const names: Partial<Record<TaskState, string>> = {
    [TaskState.TASK_STATE_FAILED]: "failed",
    [TaskState.TASK_STATE_CANCELED]: "was cancelled",
    [TaskState.TASK_STATE_REJECTED]: "rejected the task",
    [TaskState.TASK_STATE_AUTH_REQUIRED]: "requires authentication",
  };
  return `error: the agent ${(state !== undefined && names[state]) || "did not finish the task"}${said ? `: ${said}` : ""}`;
}

/** Connects to one agent and offers its skills. */
async function startAgent(name: string, agent: A2aAgent, log: Logger): Promise<ToolSource> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    for (const [k, v] of Object.entries(agent.headers)) headers.set(k, v);
    return fetch(input, { ...init, headers });
  };
  let client: Client;
  try {
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
      }),
    );
    client = await factory.createFromUrl(agent.url);
  } catch (err) {
    throw new ToolSourceError(`A2A agent '${name}' (${agent.url}) did not answer: ${messageOf(err)}`);
  }
  const card = await client.getAgentCard();
  const specs: ToolSpec[] = card.skills.map((skill) => ({
    name: mcpToolName(name, skill.id),
    source: "a2a",
    origin: name,
    description: `${skill.description || skill.name} (skill '${skill.id}' of the A2A agent '${card.name}')`,
    parameters: PARAMETERS,
    idempotent: false,
    ...(agent.timeoutMs === undefined ? {} : { timeoutMs: agent.timeoutMs }),
    ...(agent.maxResultBytes === undefined ? {} : { maxResultBytes: agent.maxResultBytes }),
    prepare(args) {
      if (typeof args !== "object" || args === null || Array.isArray(args))
        return { ok: false, problems: "(arguments): expected a JSON object" };
      const text = Reflect.get(args, "text");
      const inputs = Reflect.get(args, "inputs");
      if (typeof text !== "string") return { ok: false, problems: "text: expected a string" };
      if (inputs !== undefined && (typeof inputs !== "object" || inputs === null || Array.isArray(inputs)))
        return { ok: false, problems: "inputs: expected an object" };
      const parts: Part[] = [textPart(text)];
      if (inputs !== undefined)
        parts.push({ content: { $case: "data", value: { inputs } }, metadata: undefined, filename: "", mediaType: "application/json" });
      return {
        ok: true,
        run: async (signal) => {
          const message: Message = {
            messageId: randomUUID(),
            contextId: "",
            taskId: "",
            role: Role.ROLE_USER,
            parts,
            metadata: { skill: skill.id },
            extensions: [],
            referenceTaskIds: [],
          };
          const result = await client.sendMessage({ tenant: "", message, configuration: undefined, metadata: {} }, { signal });
          return taskAnswer(result);
        },
      };
    },
  }));
  log.info({ a2aAgent: name, tools: specs.length }, `A2A agent '${name}' offers ${specs.length} skills`);
  return { kind: "a2a", name: `the A2A agent '${name}'`, tools: specs, close: async () => undefined };
}

/**
 * Connects to every agent (at once) and lists their skills.
 * @throws {ToolSourceError} naming each agent that did not answer.
 */
export async function startA2aSources(config: A2aAgents, log: Logger = silentLogger): Promise<ToolSource[]> {
  const settled = await Promise.allSettled(Object.entries(config.agents).map(([name, agent]) => startAgent(name, agent, log)));
  const failed = settled.flatMap((s) => (s.status === "rejected" ? [messageOf(s.reason)] : []));
  if (failed.length > 0) throw new ToolSourceError(failed.join("; "));
  return settled.flatMap((s) => (s.status === "fulfilled" ? [{ ...s.value, secrets: config.secrets }] : []));
}
