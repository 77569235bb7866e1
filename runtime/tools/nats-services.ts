/**
 * NATS services as a tool source: an endpoint of any service that speaks the NATS service (micro) protocol v1, in
 * any language, is a tool when its metadata says so. Services are found by a `$SRV.INFO` request whose answers
 * (`io.nats.micro.v1.info_response`, one per service instance) are gathered for a short window; that is done at
 * Handler start, every `DIRIGENT_TOOL_DISCOVERY_MS`, and when a called tool had no responders. Endpoint metadata:
 *
 * - `dirigent.tool.description` (required: without it the endpoint is not a tool), what the model reads;
 * - `dirigent.tool.parameters`, the JSON Schema of the arguments as text (absent: no arguments; not a usable object
 *   schema: the tool is left out, logged);
 * - `dirigent.tool.idempotent` = `"true"`: a repeat does no harm (a call in flight in a crashed Handler runs again).
 *
 * The tool's name is the endpoint's `name`; its `subject` must be under `<root>.tools.<service>.`, the subjects of its
 * own service (the only ones that service's NATS user may receive, `dirigent nats-conf --tool-service`). A call is a
 * request to that subject whose body is the arguments as JSON; the reply body is the result; a reply with a
 * `Nats-Service-Error` header is an error the model reads.
 *
 * With an allowlist (`DIRIGENT_NATS_TOOL_ALLOW`: `<service>/<tool>`, `<service>/*`), each listed service is also asked
 * by name (`$SRV.INFO.<service>`, which only its own user may receive) and only those answers describe its tools: a
 * service answering `$SRV.INFO` under another's name is not believed. A service or tool not on the list is not offered.
 */
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { Subjects } from "../../protocol/index.js";
import { silentLogger, type Logger } from "../../actors/deps.js";
import { messageOf } from "../../protocol/errors.js";
import { wireOf } from "../nats/wire.js";
import { TOOL_SERVICE_NAME } from "../nats/tool-service-users.js";
import { ENV_NAMES } from "../config-names.js";
import { TOOL_NAME_PATTERN, type ToolSource, type ToolSpec } from "./source.js";

/** How long the answers to one `$SRV.INFO` request are gathered by default. */
export const DISCOVERY_WINDOW_MS = 500;
/** The `type` of a service's answer to `$SRV.INFO`. */
export const INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response";
/** Endpoint metadata keys. */
export const META_DESCRIPTION = "dirigent.tool.description";
export const META_PARAMETERS = "dirigent.tool.parameters";
export const META_IDEMPOTENT = "dirigent.tool.idempotent";
/** Headers of a service's error reply. */
export const ERROR_HEADER = "Nats-Service-Error";
export const ERROR_CODE_HEADER = "Nats-Service-Error-Code";

/** Options of {@link startNatsToolSource}. */
export interface NatsToolOptions {
  subjects: Subjects;
  log?: Logger;
  /** Interval of the periodic re-discovery; 0: none. */
  rediscoverMs: number;
  /** How long the answers of one discovery are gathered; {@link DISCOVERY_WINDOW_MS} by default. */
  windowMs?: number;
  /** The operator's allowlist (`weather/get_weather`, `calc/*`); empty or absent: every service's tools. */
  allow?: readonly string[];
}

/** The setting that holds the allowlist, named in what is logged. */
const ALLOW_SETTING = ENV_NAMES.natsToolAllow;

/** One answer to a discovery request: its body, and the service asked by name (`$SRV.INFO.<service>`) if it was. */
export interface InfoAnswer {
  data: Uint8Array;
  asked?: string | undefined;
}

/** The allowlist by service: the tool names allowed, or `"*"` for all of them. */
type Allowlist = ReadonlyMap<string, ReadonlySet<string> | "*">;

/** The allowlist of `entries` (`<service>/<tool>`, `<service>/*`, as the configuration checked them). */
export function allowlistOf(entries: readonly string[]): Allowlist {
  const allow = new Map<string, Set<string> | "*">();
  for (const entry of entries) {
    const [service = "", tool = ""] = entry.split("/");
    const known = allow.get(service);
    if (tool === "*" || known === "*") allow.set(service, "*");
    else allow.set(service, new Set([...(known ?? []), tool]));
  }
  return allow;
}

/** A tool as a service offers it. */
interface Found {
  name: string;
  subject: string;
  service: string;
  description: string;
  parameters: Record<string, unknown> | undefined;
  idempotent: boolean;
}

/** The NATS service tool source, running: its tools are those of the last discovery. */
export interface NatsToolSource extends ToolSource {
  /** Asks the services again (one discovery at a time; a call while one runs joins it). */
  discover(): Promise<void>;
}

/** An error whose message the model reads as it is (see `isToolError` in source.ts). */
class ToolError extends Error {
  override name = "ToolError";
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();
const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Sends a `$SRV.INFO` request, and one `$SRV.INFO.<service>` per service of `named`, and gathers the answers for
 * `windowMs`.
 */
async function gatherInfo(nc: NatsConnection, subjects: Subjects, windowMs: number, named: readonly string[]): Promise<InfoAnswer[]> {
  const answers: InfoAnswer[] = [];
  const ask = (subject: string, asked: string | undefined) =>
    wireOf(nc).requestMany(subject, new Uint8Array(0), (msg: Msg) => {
      if (msg.data.length > 0) answers.push({ data: msg.data, asked });
    });
  const cancels = [ask(subjects.serviceInfo, undefined), ...named.map((service) => ask(subjects.serviceInfoOf(service), service))];
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  for (const cancel of cancels) cancel();
  return answers;
}

/**
 * The tools of a set of `$SRV.INFO` answers, and what is wrong with the endpoints left out. A tool name is bound to
 * the subject it was first offered on (`bound`): an endpoint of that name on any other subject is ignored and told,
 * even while the bound one is gone, so a second service cannot take a tool over, nor remove it. A name first offered
 * on two subjects at once is left out, both named: which one the operator meant is not known.
 */
export function toolsOfInfo(
  answers: readonly (Uint8Array | InfoAnswer)[],
  subjects: Subjects,
  bound: ReadonlyMap<string, string> = new Map(),
  allow: Allowlist = new Map(),
): { found: Found[]; problems: string[] } {
  const problems: string[] = [];
  const byName = new Map<string, Found[]>();
  const unlisted = new Set<string>();
  for (const answer of answers) {
    const { data, asked } = answer instanceof Uint8Array ? { data: answer, asked: undefined } : answer;
    let info: unknown;
    try {
      info = JSON.parse(decoder.decode(data));
    } catch {
      continue;
    }
    if (!isRecord(info) || info["type"] !== INFO_RESPONSE_TYPE || !Array.isArray(info["endpoints"])) continue;
    const service = typeof info["name"] === "string" ? info["name"] : "(unnamed)";
    const endpoints = (info["endpoints"] as unknown[]).filter(isRecord);
    if (allow.size > 0) {
      // A listed service is read from the answers to its own discovery subject only: an answer to `$SRV.INFO` can
      // come from any service, under any name. An unlisted one is told once, if it offers tools under this root.
      if (asked !== undefined && asked !== service) continue;
      if (asked === undefined) {
        const here = endpoints.some((e) => String(e["subject"]).startsWith(subjects.toolPrefix));
        if (!allow.has(service) && here && !unlisted.has(service)) {
          unlisted.add(service);
          problems.push(`NATS service '${service}' not offered: it is not in ${ALLOW_SETTING}`);
        }
        continue;
      }
    }
    const allowed = allow.get(service);
    const own = `${subjects.toolPrefix}${service}.`;
    for (const endpoint of endpoints) {
      if (!isRecord(endpoint)) continue;
      const metadata = isRecord(endpoint["metadata"]) ? endpoint["metadata"] : {};
      const description = metadata[META_DESCRIPTION];
      if (typeof description !== "string" || description.trim() === "") continue;
      const name = String(endpoint["name"]);
      const subject = String(endpoint["subject"]);
      const leftOut = (why: string) => problems.push(`NATS service '${service}': endpoint '${name}' left out: ${why}`);
      if (!TOOL_NAME_PATTERN.test(name)) {
        leftOut(`its name does not match ${TOOL_NAME_PATTERN.source}`);
        continue;
      }
      if (!TOOL_SERVICE_NAME.test(service)) {
        leftOut(`the service's name does not match ${TOOL_SERVICE_NAME.source}`);
        continue;
      }
      if (!subject.startsWith(own) || subject.length === own.length) {
        leftOut(`its subject '${subject}' is not under '${subjects.toolServiceSubjects(service)}' (its service's own subjects)`);
        continue;
      }
      if (allowed !== undefined && allowed !== "*" && !allowed.has(name)) {
        leftOut(`it is not in ${ALLOW_SETTING}`);
        continue;
      }
      let parameters: Record<string, unknown> | undefined;
      const schemaText = metadata[META_PARAMETERS];
      if (schemaText !== undefined) {
        try {
          const parsed: unknown = JSON.parse(String(schemaText));
          if (!isRecord(parsed) || parsed["type"] !== "object") throw new Error('it is not an object schema (`"type": "object"`)');
          const { $schema: _dialect, ...given } = parsed;
          parameters = { ...given, properties: given["properties"] ?? {} };
        } catch (err) {
          leftOut(`its ${META_PARAMETERS} is not a usable JSON Schema (${messageOf(err)})`);
          continue;
        }
      }
      const found: Found = { name, subject, service, description, parameters, idempotent: metadata[META_IDEMPOTENT] === "true" };
      // Instances of one service answer alike: one tool.
      const same = byName.get(name) ?? [];
      if (!same.some((f) => f.subject === subject)) byName.set(name, [...same, found]);
    }
  }
  const found: Found[] = [];
  const where = (f: Found) => `'${f.subject}' (${f.service})`;
  for (const [name, offers] of byName) {
    const boundTo = bound.get(name);
    const kept = boundTo === undefined ? (offers.length === 1 ? offers[0] : undefined) : offers.find((f) => f.subject === boundTo);
    if (kept) found.push(kept);
    if (boundTo === undefined && !kept)
      problems.push(`NATS services: tool '${name}' left out: first offered on ${offers.map(where).join(" and ")} at once`);
    for (const other of boundTo === undefined ? [] : offers.filter((f) => f !== kept))
      problems.push(
        `NATS services: tool '${name}' on ${where(other)} ignored: the name is bound to '${boundTo}', where it was first offered, until the Handler restarts`,
      );
  }
  return { found: found.sort((a, b) => a.name.localeCompare(b.name)), problems };
}

/**
 * Finds the tools of the NATS services reachable on `nc` and keeps finding them again.
 * @example
 * const source = await startNatsToolSource(nc, { subjects, rediscoverMs: 30_000, log });
 */
export async function startNatsToolSource(nc: NatsConnection, options: NatsToolOptions): Promise<NatsToolSource> {
  const { subjects, rediscoverMs } = options;
  const log = options.log ?? silentLogger;
  const allow = allowlistOf(options.allow ?? []);
  if (allow.size === 0)
    log.warn(
      {},
      `NATS service tools: ${ALLOW_SETTING} is empty, so every service's tools are offered; name the services and tools you mean (docs/tools.md)`,
    );
  const windowMs = options.windowMs ?? DISCOVERY_WINDOW_MS;
  const validator = new AjvJsonSchemaValidator();
  const watchers: Array<() => void> = [];
  let specs: ToolSpec[] = [];
  /** The subject each tool name was first offered on, for the life of the source (see {@link toolsOfInfo}). */
  const bound = new Map<string, string>();
  let seen = "";
  let running: Promise<void> | undefined;
  let closed = false;

  const specOf = (found: Found): ToolSpec | undefined => {
    let check: ((args: unknown) => { valid: boolean; errorMessage?: string | undefined }) | undefined;
    if (found.parameters) {
      try {
        check = validator.getValidator(found.parameters as Parameters<AjvJsonSchemaValidator["getValidator"]>[0]);
      } catch (err) {
        log.error(
          { natsService: found.service, tool: found.name },
          `NATS service '${found.service}': endpoint '${found.name}' left out: its ${META_PARAMETERS} is not a usable JSON Schema (${messageOf(err)})`,
        );
        return undefined;
      }
    }
    return {
      name: found.name,
      source: "nats",
      origin: found.service,
      description: found.description,
      parameters: found.parameters ?? { type: "object", properties: {} },
      idempotent: found.idempotent,
      prepare(args) {
        if (!isRecord(args)) return { ok: false, problems: "(arguments): expected a JSON object" };
        const checked = check?.(args);
        if (checked && !checked.valid) return { ok: false, problems: checked.errorMessage ?? "they do not match the tool's schema" };
        return { ok: true, run: (signal) => call(found, args, signal) };
      },
    };
  };

  /** One request to the endpoint; the first reply is the answer (the toolset's timeout ends a silent one). */
  const call = (found: Found, args: Record<string, unknown>, signal: AbortSignal): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const onAbort = () => {
        cancel();
        reject(signal.reason);
      };
      const cancel = wireOf(nc).requestMany(found.subject, encoder.encode(JSON.stringify(args)), (msg) => {
        cancel();
        signal.removeEventListener("abort", onAbort);
        if (msg.data.length === 0 && msg.headers?.code === 503) {
          // Answered once the services were asked again: the model's next turn is offered what is left.
          void discover().then(() =>
            reject(
              new ToolError(
                `'${found.name}' has no responders on '${found.subject}' now (its service stopped); the tools offered were updated. Go on without it or try later`,
              ),
            ),
          );
          return;
        }
        const error = msg.headers?.get(ERROR_HEADER);
        if (error) {
          const code = msg.headers?.get(ERROR_CODE_HEADER);
          reject(new ToolError(`${error}${code ? ` (code ${code})` : ""}`));
          return;
        }
        resolve(resultText(msg.data));
      });
      signal.addEventListener("abort", onAbort, { once: true });
    });

  const discoverOnce = async () => {
    let found: Found[];
    let problems: string[];
    try {
      const answers = await gatherInfo(nc, subjects, windowMs, [...allow.keys()]);
      ({ found, problems } = toolsOfInfo(answers, subjects, bound, allow));
    } catch (err) {
      log.error({}, `NATS service tools: discovery failed: ${messageOf(err)}; the tools found before stay offered`);
      return;
    }
    // Logged and offered anew only when something changed: not every interval.
    const fingerprint = JSON.stringify([found, problems]);
    if (closed || fingerprint === seen) return;
    seen = fingerprint;
    for (const problem of problems) log.error({}, problem);
    specs = found.flatMap((f) => specOf(f) ?? []);
    for (const f of found) if (!bound.has(f.name)) bound.set(f.name, f.subject);
    log.info({ tools: specs.map((s) => s.name) }, `NATS service tools: ${specs.length} found`);
    for (const watcher of watchers) watcher();
  };
  const discover = (): Promise<void> => (running ??= discoverOnce().finally(() => (running = undefined)));

  await discover();
  const timer = rediscoverMs > 0 ? setInterval(() => void discover(), rediscoverMs) : undefined;
  timer?.unref();
  return {
    kind: "nats",
    name: "the NATS services",
    get tools() {
      return specs;
    },
    watch(changed) {
      watchers.push(changed);
    },
    discover,
    async close() {
      closed = true;
      clearInterval(timer);
      await running;
    },
  };
}

/** A reply body as the model reads it: a JSON string as its text, anything else as sent. */
function resultText(data: Uint8Array): string {
  const text = decoder.decode(data);
  if (text.trim() === "") return "(the tool answered with an empty result)";
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "string") return parsed;
  } catch {
    // Not JSON: the text itself.
  }
  return text;
}
