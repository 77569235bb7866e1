/**
 * The HTTP side of `dirigent a2a`: the agent card at `/.well-known/agent-card.json`, whose skills are the library
 * templates, and A2A JSON-RPC at `/` (v1.0 methods, and the v0.3 ones: `message/send`, `message/stream`,
 * `tasks/get`, `tasks/cancel`), served by the A2A SDK's Express handlers behind the rules of `http-guard.ts`.
 */
import { createServer, type Server } from "node:http";
import express from "express";
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, type AgentCard } from "@a2a-js/sdk";
import { duplicateInterfacesForLegacy } from "@a2a-js/sdk/compat/v0_3";
import { DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { listenGuarded } from "../inspect/guard.js";
import { checkListen, refuse } from "./http-guard.js";
import { DirigentExecutor, type A2aExecutorDeps } from "./a2a-executor.js";
import type { LibraryTool } from "./library-tools.js";

/** Options of {@link startA2aServer}. */
export interface A2aServerOptions extends A2aExecutorDeps {
  /** TCP port; 0 picks a free one. */
  port: number;
  /** Interface; `127.0.0.1` by default. Any other than loopback needs `token`. */
  host?: string;
  /** More `Host` names answered (`--allowed-host`). */
  allowedHosts?: readonly string[];
  /** Bearer token every request must carry. */
  token?: string;
  /** The agent's name on its card. */
  name?: string;
  version: string;
}

/** A running A2A server. */
export interface A2aServer {
  /** `http://<host>:<port>/`, the agent's base URL. */
  readonly url: string;
  close(): Promise<void>;
}

/** The agent card: the library templates as skills. */
export function agentCard(tools: readonly LibraryTool[], url: string, name: string, version: string): AgentCard {
  return {
    name,
    description:
      "dirigent: runs task templates as LLM task trees. Each skill is a template of the library; a message without a skill runs its text as a task.",
    supportedInterfaces: duplicateInterfacesForLegacy(
      [{ url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
      ["JSONRPC"],
    ),
    provider: undefined,
    version,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: tools.map((t) => ({
      id: t.name,
      name: t.name,
      description: `${t.description} Inputs: ${t.params.map((p) => p.name).join(", ") || "none"} (a data part { "inputs": {…} }, or the text for a template of one input).`,
      tags: [t.kind],
      examples: [],
      inputModes: ["text/plain", "application/json"],
      outputModes: ["text/plain", "application/json"],
      securityRequirements: [],
    })),
    signatures: [],
  };
}

/** Starts the A2A server; rejects when the address is not allowed or the port is taken. */
export async function startA2aServer(options: A2aServerOptions): Promise<A2aServer> {
  const host = options.host ?? "127.0.0.1";
  checkListen(host, options.token, "A2A server");
  let hosts = new Set<string>();
  const app = express();
  app.disable("x-powered-by");
  app.use((req, res, next) => {
    if (!refuse(req, res, hosts, options.token)) next();
  });
  const http: Server = createServer(app);
  const listening = await listenGuarded(http, options.port, host, options.allowedHosts ?? []);
  hosts = listening.hosts;
  const url = `${listening.base}/`;
  const card = agentCard(options.tools, url, options.name ?? "dirigent", options.version);
  // The SDK keeps the bus of an input-required task, so a cancellation reaches the executor in every state.
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new DirigentExecutor(options));
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat: { enabled: true } }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  return {
    url,
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
