/**
 * How a configuration becomes each role's settings: the one place that maps `Config` (environment, flags, file) onto
 * what `startHandler`, `startEvaluator`, `startDirector`, `startSupervisor` and the Handler's toolset take. The
 * composition root (runtime/system.ts) starts the roles with them.
 */
import type { TaskStore } from "../actors/bus.js";
import type { startDirector } from "../actors/director/director.js";
import type { startEvaluator } from "../actors/evaluator/evaluator.js";
import type { startHandler } from "../actors/handler/handler.js";
import type { TemplateLibrary } from "../actors/library/library.js";
import type { startSupervisor } from "../actors/supervisor/supervisor.js";
import type { ParseCache } from "../machines/language/parse-cache.js";
import type { Config } from "./config.js";
import { hiddenPaths } from "./secrets.js";
import type { createToolset, toolSelection } from "./tools/toolset.js";

type DirectorSettings = Parameters<typeof startDirector>[3];

/** The Handler's tools: the workspace, the sandbox and the limits of every tool source. */
export function toolsetSettings(
  config: Config,
  secrets: string[],
  enabled: ReturnType<typeof toolSelection>["enabled"],
): Parameters<typeof createToolset>[0] {
  return {
    workspaceRoot: config.workspaceRoot,
    enabled,
    commands: config.commands,
    sandbox: {
      mode: config.sandbox,
      network: config.sandboxNetwork === "on",
      readOnly: config.sandboxReadOnly,
      hidden: hiddenPaths(config),
    },
    secrets,
    readMaxBytes: config.readMaxBytes,
    listMaxEntries: config.listMaxEntries,
    scriptTimeoutMs: config.scriptTimeoutMs,
    scriptKillGraceMs: config.scriptKillGraceMs,
    scriptOutputMaxBytes: config.scriptOutputMaxBytes,
    scriptEnv: config.scriptEnv,
    toolTimeoutMs: config.toolTimeoutMs,
    toolResultMaxBytes: config.toolResultMaxBytes,
    toolDescriptionMaxBytes: config.toolDescriptionMaxBytes,
    toolSchemaMaxBytes: config.toolSchemaMaxBytes,
  };
}

/** The Handler's sessions: model, turn and context-window limits, prices, streaming, the secrets it masks. */
export function handlerSettings(
  config: Config,
  secrets: string[],
  defaultTools: ReturnType<typeof toolSelection>["defaultTools"],
): Parameters<typeof startHandler>[1] {
  return {
    natsTools: config.natsTools,
    defaultModel: config.model,
    maxTurns: config.maxTurns,
    baseSystemPrompt: config.baseSystemPrompt,
    concurrency: config.concurrency,
    contextWindowTokens: config.contextWindowTokens,
    maxContextWindowFraction: config.maxContextWindowFraction,
    warningThreshold: config.warningThreshold,
    maxMalformedToolCalls: config.maxMalformedToolCalls,
    ...(config.maxOutputTokens > 0 ? { maxOutputTokens: config.maxOutputTokens } : {}),
    ...(defaultTools ? { defaultTools } : {}),
    prices: config.modelPrices,
    streamDeltas: config.streamDeltas,
    secrets,
  };
}

/** The Evaluator's walks; `env` is read once, at start, for a template's `from="env:NAME"` inputs. */
export function evaluatorSettings(
  config: Config,
  shared: { library: TemplateLibrary; parseCache: ParseCache; records: TaskStore | undefined; secrets: string[] },
  env: NodeJS.ProcessEnv,
): Parameters<typeof startEvaluator>[1] {
  return {
    concurrency: config.concurrency,
    taskTimeoutMs: config.taskTimeoutMs,
    substitution: config.substitution,
    library: shared.library,
    maxSubtaskDepth: config.maxSubtaskDepth,
    // Only the allowlisted variables: a template cannot read the rest of the environment.
    envInputs: {
      allowed: config.envInputs,
      values: Object.fromEntries(config.envInputs.flatMap((name) => (env[name] === undefined ? [] : [[name, env[name]]]))),
    },
    taskParallelism: config.taskParallelism,
    maxEvaluations: config.maxEvaluations,
    continuationTools: config.continuationTools,
    templateTools: config.templateTools,
    inputTimeoutMs: config.inputTimeoutMs,
    reparse: config.reparse,
    commands: config.commands,
    parseCache: shared.parseCache,
    records: shared.records,
    secrets: shared.secrets,
  };
}

/** The Director's intake and runs: size limits, the stored results and events, node records' retention. */
export function directorSettings(
  config: Config,
  parseCache: ParseCache,
  stored: {
    lastPublished?: DirectorSettings["lastPublished"] | undefined;
    publishStored?: DirectorSettings["publishStored"] | undefined;
    orderedWrites?: DirectorSettings["orderedWrites"] | undefined;
    turns?: TaskStore | undefined;
  },
): DirectorSettings {
  return {
    concurrency: config.concurrency,
    taskTimeoutMs: config.taskTimeoutMs,
    substitution: config.substitution,
    ...(stored.lastPublished ? { lastPublished: stored.lastPublished } : {}),
    ...(stored.publishStored ? { publishStored: stored.publishStored } : {}),
    ...(stored.orderedWrites ? { orderedWrites: stored.orderedWrites } : {}),
    sizeLimits: {
      submissionBytes: config.maxSubmissionBytes,
      inputBytes: config.maxInputBytes,
      templateBytes: config.maxTemplateBytes,
    },
    parseCache,
    ...(stored.turns ? { records: { store: stored.turns, maxAgeMs: config.recordsMaxAgeMs } } : {}),
  };
}

/** The Supervisor's goal loops; `owner` names this process in its leases. */
export function supervisorSettings(config: Config, owner: string): Parameters<typeof startSupervisor>[2] {
  return {
    owner,
    maxConcurrent: config.supervisorMaxGoals,
    staggerMs: config.supervisorStaggerMs,
    tickMs: config.supervisorTickMs,
    leaseMs: config.goalLeaseMs,
    maxParallel: config.goalMaxParallel,
    costThresholdUsd: config.goalCostThreshold,
    maxReplans: config.goalMaxReplans,
    alertWebhook: config.alertWebhook,
    concurrency: config.concurrency,
    effects: { cheapModel: config.cheapModel, subGoalTimeoutMs: config.goalSubtaskTimeoutMs, stepTimeoutMs: config.taskTimeoutMs },
  };
}
