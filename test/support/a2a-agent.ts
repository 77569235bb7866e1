/**
 * A small A2A agent for tests, built with the A2A SDK's server: one skill `shout` that answers the message's text in
 * capitals (with any data part's inputs appended as JSON), after checking the bearer token when given one.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, TaskState, type AgentCard, type Part } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

export interface TestA2aAgent {
  url: string;
  /** The `authorization` headers of the requests received. */
  authorizations: (string | undefined)[];
  close(): Promise<void>;
}

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

const shouter: AgentExecutor = {
  execute: async (context, bus) => {
    const { taskId, contextId } = context;
    const parts = context.userMessage.parts;
    const said = parts.flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : [])).join(" ");
    const data = parts.flatMap((p) => (p.content?.$case === "data" ? [JSON.stringify(p.content.value)] : [])).join(" ");
    const now = new Date().toISOString();
    bus.publish(
      AgentEvent.task({
        id: taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now, message: undefined },
        artifacts: [],
        history: [context.userMessage],
        metadata: {},
      }),
    );
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: {
          artifactId: "a",
          name: "answer",
          description: "",
          parts: [text(`${said.toUpperCase()}!${data ? ` ${data}` : ""}`)],
          metadata: {},
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: {},
      }),
    );
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: now, message: undefined },
        metadata: {},
      }),
    );
  },
  cancelTask: async () => undefined,
};

/** Starts the agent on a free loopback port. */
export async function startTestA2aAgent(): Promise<TestA2aAgent> {
  const authorizations: (string | undefined)[] = [];
  const app = express();
  app.use((req, _res, next) => {
    authorizations.push(req.headers.authorization);
    next();
  });
  const http = createServer(app);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  const card: AgentCard = {
    name: "shouter",
    description: "Shouts.",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "shout",
        name: "Shout",
        description: "Says the text louder.",
        tags: [],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), shouter);
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  return {
    url,
    authorizations,
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
