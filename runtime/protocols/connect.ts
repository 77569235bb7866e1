/**
 * The runtime a protocol server (`dirigent mcp`, `dirigent a2a`) submits its tasks to: a running one over NATS, or,
 * when no NATS server answers, an embedded one in this process (as `dirigent run` does), and its template library.
 */
import { stat } from "node:fs/promises";
import { loadLibrary, type TemplateLibrary } from "../../actors/library/library.js";
import type { Logger } from "../../actors/deps.js";
import { DirigentClient } from "../client.js";
import type { Config } from "../config.js";
import { placeClient } from "../nats/connect.js";
import { embeddedModel } from "../model/embedded.js";
import { startSystem, type SystemHandle } from "../system.js";
import type { Subjects } from "../../protocol/index.js";
import { UsageError } from "../cli/common.js";

/** A connection to a runtime. */
export interface RuntimeConnection {
  client: DirigentClient;
  /** Where the tasks run, for a log line. */
  note: string;
  close(): Promise<void>;
}

/** Connects to the runtime at `config.nats` (or the default address), or starts an embedded one. */
export async function connectRuntime(config: Config, subjects: Subjects, log: Logger, name: string): Promise<RuntimeConnection> {
  const placement = await placeClient(config, subjects, log, name);
  let system: SystemHandle | undefined;
  let stopModel: (() => Promise<void>) | undefined;
  let note = `the runtime on ${placement.note}`;
  if (placement.transport.kind === "memory") {
    const model = await embeddedModel(config);
    stopModel = model.stop;
    if (model.note) log.warn({}, model.note);
    system = await startSystem({ config: model.config, transport: placement.transport, log, metrics: false });
    note = `an embedded runtime (no NATS server reachable)`;
  }
  return {
    client: new DirigentClient(placement.transport.bus, subjects),
    note,
    close: async () => {
      await system?.stop();
      await placement.close();
      await stopModel?.();
    },
  };
}

/** The template library of `dir`, which must exist; its invalid files are logged and left out. */
export async function libraryOf(dir: string, log: Logger): Promise<TemplateLibrary> {
  const exists = await stat(dir).then(
    () => true,
    () => false,
  );
  if (!exists) throw new UsageError(`templates directory '${dir}' does not exist (give one with --templates DIR or DIRIGENT_TEMPLATES)`);
  const { library, errors } = await loadLibrary(dir, { required: true });
  for (const e of errors) log.warn({ file: e.file, line: e.line, col: e.col }, `template left out: ${e.message}`);
  return library;
}
