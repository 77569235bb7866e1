/// <reference types="node" preserve="true" />
/**
 * dirigent's library entry: start roles in your own process, talk to a runtime, run the offline model.
 * The wire contract alone is `dirigent/protocol`. Its types use Node's (`NodeJS.ProcessEnv`, `AsyncDisposable`): the
 * reference above brings `@types/node` (a dependency) into a consumer's program even when its tsconfig lists no
 * `types` (TypeScript 6 and later include no `@types` package by default). docs/embedding.md shows the use.
 */
export { startSystem, ROLES, type Role, type SystemHandle, type SystemOptions, type Transport } from "./system.js";
export { loadConfig, ConfigError, DEFAULTS, ENV_NAMES, type Config } from "./config.js";
export { DirigentClient, RemoteError, type RunOptions, type SubmitInput, type TaskWatch } from "./client.js";
export { GoalClient } from "./goal-client.js";
export { openNatsTransport, openMemoryTransport, type OpenTransport } from "./transport.js";
export { place, DEFAULT_NATS_URL, type Placement } from "./nats/connect.js";
export { startMockLlm, loadMockScript, MockScript, type MockLlmServer } from "./model/mock-server.js";
export { startNatsServer, findNatsServer, NatsServerNotFoundError } from "./nats/server-process.js";
export { type CallModel } from "../actors/model.js";
export { silentLogger, type Logger } from "../actors/deps.js";
export { defineTool, type ToolDeclaration, type ToolRunContext, type TypeScriptTool } from "./tools/typescript.js";
export { createModelClient } from "./model/openai.js";
export { parseTemplate } from "../machines/language/parse.js";
export {
  createLibrary,
  libraryFromXml,
  loadLibrary,
  type LibraryError,
  type LibraryTemplate,
  type LoadedLibrary,
  type MatchOptions,
  type TemplateLibrary,
  type TemplateMatch,
} from "../actors/library/library.js";
export { createSubjects, DEFAULT_ROOT } from "../protocol/index.js";
