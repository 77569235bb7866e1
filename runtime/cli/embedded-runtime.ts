/** The runtime a command starts in its own process when none is reachable (`dirigent run`, `dirigent checkmate`). */
import type { Config } from "../config.js";
import type { Logger } from "../../actors/deps.js";
import { embeddedModel } from "../model/embedded.js";
import type { Placement } from "../nats/connect.js";
import { startSystem, type SystemHandle } from "../system.js";

/** An embedded runtime on `placement`, started only when asked; {@link EmbeddedRuntime.close} also closes `placement`. */
export interface EmbeddedRuntime {
  /** Whether it was started. */
  readonly started: boolean;
  /** Starts it with the configured model (or the built-in mock), and says so on stderr. */
  start(): Promise<void>;
  /** Stops it, if started, then closes the placement and stops the model. */
  close(): Promise<void>;
}

/** The embedded runtime of a command on `placement`. */
export function embeddedRuntime(config: Config, placement: Placement, log: Logger): EmbeddedRuntime {
  let system: SystemHandle | undefined;
  let stopModel: (() => Promise<void>) | undefined;
  return {
    get started() {
      return system !== undefined;
    },
    async start() {
      const model = await embeddedModel(config);
      stopModel = model.stop;
      if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
      process.stderr.write(`dirigent: no runtime reachable; running an embedded one on ${placement.note}\n`);
      system = await startSystem({ config: model.config, transport: placement.transport, log, metrics: false });
    },
    async close() {
      await system?.stop();
      await placement.close();
      await stopModel?.();
    },
  };
}
