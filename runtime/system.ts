/**
 * The composition root: starts the chosen roles on a transport and stops them in reverse order.
 */
import { randomUUID } from "node:crypto";
import type { Bus, LastPublished, PublishStored, TaskStore, WorkQueue } from "../actors/bus.js";
import { silentLogger, type ActorDeps, type Logger, type RoleHandle } from "../actors/deps.js";
import { startDirector } from "../actors/director/director.js";
import type { OrderedWrites } from "../actors/director/vouching.js";
import { LocalResponders } from "../actors/local.js";
import { startEvaluator } from "../actors/evaluator/evaluator.js";
import { startHandler } from "../actors/handler/handler.js";
import { startCompiler } from "../actors/compiler/compiler.js";
import { startMemory } from "../actors/memory/memory.js";
import type { IndexStore } from "../actors/memory/index-store.js";
import { answersOnly, type CallModel } from "../actors/model.js";
import { embeddedModel } from "./model/embedded.js";
import { createModelClient } from "./model/openai.js";
import { modelClientConfig, providerKeys, withProviders } from "./model/providers.js";
import { createToolset, toolSelection } from "./tools/toolset.js";
import { typeScriptSource, type TypeScriptTool } from "./tools/typescript.js";
import { configuredSources } from "./tools/configured.js";
import { NatsBus } from "./nats/bus.js";
import { createSubjects, type Subjects } from "../protocol/index.js";
import { loadLibrary, type TemplateLibrary } from "../actors/library/library.js";
import { DEFAULTS, type Config } from "./config.js";
import { llmMatchOptions } from "./model/memory-model.js";
import { inspectHookFor } from "./inspect/publisher.js";
import { startSupervisor } from "../actors/supervisor/supervisor.js";
import type { KeyedStore } from "../actors/supervisor/goal-store.js";
import { hostname } from "node:os";
import { startPingResponder } from "./health.js";
import { secretValues } from "./secrets.js";
import { createParseCache } from "../machines/language/parse-cache.js";
import { traceContentWanted } from "./tracing/sdk.js";
import { startSystemMetrics } from "./metrics/start.js";
import { directorSettings, evaluatorSettings, handlerSettings, supervisorSettings, toolsetSettings } from "./role-settings.js";

/** The roles: the four of the task pipeline, and the Supervisor of autonomous goals. */
export const ROLES = ["director", "evaluator", "handler", "memory", "supervisor"] as const;
export type Role = (typeof ROLES)[number];

/** What the roles run on: a bus, plus durable storage and a work queue for the Director. */
export interface Transport {
  bus: Bus;
  store: TaskStore;
  queue: WorkQueue;
  /** Closes the connection (draining it) or the in-process bus. */
  close(): Promise<void>;
  /** The global file-metadata index the Memory role serves; an empty one when absent. */
  index?: IndexStore;
  /** The Handler's records of sessions and scripts (resume without repeating model calls); none when absent. */
  turns?: TaskStore;
  /** Goals and Supervisor leases (the Supervisor role); none: that role cannot run. */
  goals?: KeyedStore;
  /** The last message stored on `subject` in the events stream (`undefined`: none); absent when nothing is stored. */
  lastPublished?: LastPublished;
  /** Stores a task's result in the events stream with an acknowledgement (see `DirectorConfig.publishStored`). */
  publishStored?: PublishStored;
  /** Creates the events stream should the transport not have at open (opened for no Director); idempotent. */
  openEvents?: () => Promise<void>;
  /** Writes to the events stream stored in the order sent (see `DirectorConfig.orderedWrites`). */
  orderedWrites?: OrderedWrites;
}

/** Options of {@link startSystem}. */
export interface SystemOptions {
  config: Config;
  transport: Transport;
  /** Roles to run in this process; all four by default. */
  roles?: readonly Role[];
  log?: Logger;
  /** The model client; by default the `openai` SDK configured from `config`. */
  callModel?: CallModel;
  /** The template library of the Evaluator; by default loaded from `config.templates`. */
  library?: TemplateLibrary;
  /**
   * Serve Prometheus metrics on `config.metricsPort` (docs/operations.md); default: when a port is configured. The
   * embedded runtime of a one-shot command (`dirigent run`) passes false: it would take the port of a real one.
   */
  metrics?: boolean;
  /** TypeScript tools offered to the Handler's sessions besides the configured ones ({@link defineTool}, docs/tools.md). */
  tools?: readonly TypeScriptTool[];
}

/**
 * Loads the template library: the default directory may be missing (an empty library), a directory named in
 * the configuration may not. Templates that do not validate are logged with file, line and column, and skipped.
 */
async function loadTemplates(dir: string, log: Logger): Promise<TemplateLibrary> {
  const required = dir !== DEFAULTS.templates;
  const { library, errors } = await loadLibrary(dir, { required });
  // The directory itself is missing or unreadable: a named one is a configuration error.
  const unusable = errors.find((e) => e.file === dir && e.line === undefined);
  if (required && unusable) throw new Error(`template library: ${unusable.message} (DIRIGENT_TEMPLATES / --templates)`);
  for (const e of errors) log.warn({ file: e.file, line: e.line, col: e.col }, `template skipped: ${e.message}`);
  return library;
}

/** A running set of roles. */
export interface SystemHandle extends AsyncDisposable {
  readonly roles: readonly Role[];
  readonly subjects: Subjects;
  readonly transport: Transport;
  /**
   * The URL of the offline mock model this system started because no model was configured (no `OPENAI_API_KEY`,
   * `OPENAI_BASE_URL` or `callModel`); absent when it uses a configured one.
   */
  readonly offlineModelUrl?: string;
  /**
   * The tools this process's Handler offers at start, with their source (`builtin`, `mcp`, `ts`, `nats`); absent
   * without a Handler. NATS services found later are not in it.
   */
  readonly handlerTools?: ReadonlyArray<{ readonly name: string; readonly source: string }>;
  /** This process's id in its answers to `<root>.ping` (see runtime/health.ts). */
  readonly processId: string;
  /** Where Prometheus scrapes this process's metrics (`DIRIGENT_METRICS_PORT`); absent: no metrics. */
  readonly metricsUrl?: string;
  /** Stops the roles (reverse start order). The transport stays open; close it yourself. */
  stop(): Promise<void>;
}

/** Starts roles on a transport. */
export async function startSystem(options: SystemOptions): Promise<SystemHandle> {
  const { transport } = options;
  const roles = options.roles ?? ROLES;
  const log = options.log ?? silentLogger;
  // As the CLI does: a Handler with no model configured (no OPENAI_API_KEY, no OPENAI_BASE_URL, no callModel) answers
  // with the offline mock model, and says so, rather than trying the public API without a key.
  const offline = roles.includes("handler") && options.callModel === undefined ? await embeddedModel(options.config) : undefined;
  if (offline?.note) log.warn({ model: offline.config.openaiBaseUrl }, offline.note);
  const config = offline?.config ?? options.config;
  const subjects = createSubjects(config.prefix);
  const metrics = options.metrics === false ? undefined : await startSystemMetrics(config, { bus: transport.bus, subjects, roles, log });
  const deps: ActorDeps = {
    bus: transport.bus,
    subjects,
    log,
    now: () => new Date(),
    newId: () => randomUUID(),
    inspect: inspectHookFor(config, transport.bus, subjects),
    local: config.localDispatch ? new LocalResponders() : undefined,
    traceContent: traceContentWanted(),
    metrics: metrics?.metrics.seam,
  };
  const started: RoleHandle[] = [];
  let handlerTools: Array<{ name: string; source: string }> | undefined;
  // Templates parsed once per system, shared by the roles that parse them.
  const parseCache = createParseCache();
  // Dependency order: whoever is asked starts before whoever asks.
  if (roles.includes("memory")) {
    const llm = llmMatchOptions(config, options.callModel);
    started.push(startMemory(deps, { concurrency: config.concurrency, ...(transport.index ? { store: transport.index } : {}), ...llm }));
  }
  if (roles.includes("handler")) {
    // Open now what a transport opened for a client left to first use (an embedded runtime of `dirigent run`): the
    // Handler writes its records behind its replies, and a store still opening would hold them back past a crash.
    await transport.turns?.open?.();
    const client = withProviders(options.callModel ?? createModelClient(modelClientConfig(config)), config);
    const callModel = metrics ? metrics.metrics.meterModel(client) : client;
    const secrets = [...secretValues(config), ...providerKeys(config)];
    const selection = toolSelection(config.tools);
    const toolset = await createToolset(toolsetSettings(config, secrets, selection.enabled), deps.log, {
      sources: [
        ...(options.tools?.length ? [typeScriptSource(options.tools)] : []),
        ...(await configuredSources(
          config,
          deps.log,
          transport.bus instanceof NatsBus ? { connection: transport.bus.connection, subjects } : undefined,
        )),
      ],
    });
    handlerTools = toolset.definitions.map((d) => ({
      name: d.function.name,
      source: toolset.info?.(d.function.name)?.source ?? "builtin",
    }));
    // The Compiler runs wherever the Handler does, on the same model client. It starts first so that it stops after
    // the Handler: a process that begins to stop unsubscribes its Handler from the queue group before it first waits
    // (a request routed to it meanwhile would still be taken).
    started.push(
      startCompiler(deps, { defaultModel: config.model, concurrency: config.concurrency }, answersOnly(callModel), transport.turns),
    );
    started.push(startHandler(deps, handlerSettings(config, secrets, selection.defaultTools), callModel, toolset, transport.turns));
  }
  if (roles.includes("evaluator")) {
    const library = options.library ?? (await loadTemplates(config.templates, deps.log));
    started.push(
      startEvaluator(
        deps,
        evaluatorSettings(
          config,
          { library, parseCache, records: transport.turns, secrets: [...secretValues(config), ...providerKeys(config)] },
          process.env,
        ),
      ),
    );
  }
  if (roles.includes("director")) {
    await Promise.all([transport.store.open?.(), transport.openEvents?.()]);
    started.push(
      startDirector(
        deps,
        transport.store,
        transport.queue,
        directorSettings(config, parseCache, {
          lastPublished: transport.lastPublished,
          publishStored: transport.publishStored,
          orderedWrites: transport.orderedWrites,
          turns: transport.turns,
        }),
      ),
    );
  }
  if (roles.includes("supervisor")) {
    if (!transport.goals) throw new Error("the supervisor role needs a goals store");
    started.push(
      startSupervisor(deps, transport.goals, supervisorSettings(config, `${hostname()}:${process.pid}:${deps.newId().slice(0, 8)}`)),
    );
  }
  // Last, so that an answer to a ping means every role of the process is serving.
  const ping = startPingResponder({
    bus: transport.bus,
    subjects,
    roles,
    log: deps.log,
    inFlight: () => (transport.bus as { readonly inFlight?: number }).inFlight,
  });
  await transport.bus.flush();
  let pingStopped: Promise<void> | undefined;
  const stop = async () => {
    // Each stop sends its UNSUBs before it first waits, so the ping's and the last role's go out at once: a role
    // serving a queue group (a Handler) takes nothing routed after its process began to stop.
    pingStopped ??= ping.stop();
    for (const role of started.reverse()) await role.stop();
    await pingStopped;
    started.length = 0;
    await metrics?.stop();
    await offline?.stop();
  };
  return {
    roles,
    subjects,
    transport,
    processId: ping.processId,
    ...(offline?.note && offline.config.openaiBaseUrl ? { offlineModelUrl: offline.config.openaiBaseUrl } : {}),
    ...(handlerTools ? { handlerTools } : {}),
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
