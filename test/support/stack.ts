/** A whole dirigent stack for integration tests: transport, roles, the mock model and a client. */
import { randomUUID } from "node:crypto";
import type { MockScript } from "../../runtime/model/mock-server.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { DirigentClient } from "../../runtime/client.js";
import { openMemoryTransport, openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { startSystem, type Role, type SystemHandle } from "../../runtime/system.js";
import { createSubjects, type TaskId } from "../../protocol/index.js";
import { silentLogger, type Logger } from "../../actors/deps.js";
import { tid } from "./ids.js";
import { randomRoot } from "./nats-server.js";
import type { TypeScriptTool } from "../../runtime/tools/typescript.js";

/** Options of {@link startStack}. */
export interface StackOptions {
  /** NATS URL; in-process when absent. */
  url?: string;
  /** Subject root; random by default. */
  root?: string;
  /** Mock model script. */
  script?: MockScript;
  /** An already running mock model to share. */
  mock?: MockLlmServer;
  roles?: readonly Role[];
  config?: Partial<Config>;
  /** TypeScript tools of the Handler (`startSystem({ tools })`). */
  tools?: readonly TypeScriptTool[];
  /** Changes the opened transport before the roles start (a fault in one of its effects). */
  wrapTransport?: (transport: OpenTransport) => OpenTransport;
  /** The intake queue's ack wait over NATS; `DIRIGENT_ACK_WAIT_MS` or its default otherwise. */
  ackWaitMs?: number;
  /** The roles' logger; silent by default. */
  log?: Logger;
}

/** A running stack. */
export interface Stack extends AsyncDisposable {
  root: string;
  config: Config;
  transport: OpenTransport;
  system: SystemHandle;
  client: DirigentClient;
  mock: MockLlmServer;
  stop(): Promise<void>;
}

/** A unique task id for a test. */
export const newTaskId = (): TaskId => tid(`t-${randomUUID()}`);

/** Starts transport, mock model and roles. */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const root = options.root ?? randomRoot();
  const ownMock = !options.mock;
  const mock = options.mock ?? (await startMockLlm({ port: 0, ...(options.script ? { script: options.script } : {}) }));
  const config: Config = {
    ...loadConfig({}, {}),
    prefix: root,
    openaiBaseUrl: mock.url,
    openaiApiKey: "test-key",
    modelMaxRetries: 0,
    model: "mock-model",
    ...options.config,
  };
  const subjects = createSubjects(root);
  const log = options.log ?? silentLogger;
  const opened = options.url
    ? await openNatsTransport(options.url, subjects, {
        name: `test-${root}`,
        log,
        records: { maxAgeMs: config.recordsMaxAgeMs, maxBytes: config.recordsMaxBytes },
        ...(options.ackWaitMs === undefined ? {} : { ackWaitMs: options.ackWaitMs }),
      })
    : openMemoryTransport(log);
  const transport = options.wrapTransport ? options.wrapTransport(opened) : opened;
  const system = await startSystem({
    config,
    transport,
    ...(options.log ? { log: options.log } : {}),
    ...(options.roles ? { roles: options.roles } : {}),
    ...(options.tools ? { tools: options.tools } : {}),
  });
  const client = new DirigentClient(transport.bus, subjects);
  const stop = async () => {
    await system.stop();
    await transport.close();
    if (ownMock) await mock.close();
  };
  return { root, config, transport, system, client, mock, stop, [Symbol.asyncDispose]: stop };
}
