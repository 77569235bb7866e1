/**
 * What a `dirigent` start loads: a command loads the SDKs of what it does, not of every command. The MCP and A2A SDKs
 * (with their HTTP servers, JSON-schema validators and JWT code) load for `dirigent mcp`, `dirigent a2a` and configured
 * MCP servers, A2A agents or NATS tool services; gpt-tokenizer's encoder (about half a second and 60 MB of tables) when
 * a Handler starts (its model list and pre-tokenizer pattern, which are small, load with the Handler's code). The modules a process loads are recorded by a preload that logs both ESM loads (a module loader
 * hook) and CommonJS requires.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI } from "../support/processes.js";

const run = promisify(execFile);
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-startup-"));
  await writeFile(
    join(dir, "hooks.mjs"),
    `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  appendFileSync(process.env.LOADED_LOG, "esm " + url + "\\n");
  return next(url, context);
}
`,
  );
  await writeFile(
    join(dir, "preload.mjs"),
    `import { register, Module } from "node:module";
import { appendFileSync } from "node:fs";
register(new URL("./hooks.mjs", import.meta.url));
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const loaded = load.call(this, request, parent, isMain);
  try { appendFileSync(process.env.LOADED_LOG, "cjs " + Module._resolveFilename(request, parent, isMain) + "\\n"); } catch {}
  return loaded;
};
`,
  );
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The packages under node_modules that `dirigent <args>` loads, by name, as ES modules and as CommonJS ones. */
async function packagesLoaded(name: string, args: string[]): Promise<{ esm: Set<string>; cjs: Set<string>; files: string[] }> {
  const log = join(dir, `${name}.log`);
  await writeFile(log, "");
  const { stdout } = await run(process.execPath, ["--import", join(dir, "preload.mjs"), CLI, ...args], {
    env: { ...process.env, LOADED_LOG: log },
  });
  expect(stdout).toContain("Usage: dirigent");
  const files = (await readFile(log, "utf8")).split("\n");
  const loaded = { esm: new Set<string>(), cjs: new Set<string>(), files };
  for (const line of files) {
    const found = /^(esm|cjs) .*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line);
    if (found?.[2]) loaded[found[1] as "esm" | "cjs"].add(found[2]);
  }
  return loaded;
}

describe("a dirigent start", () => {
  it("loads no model SDK, MCP or A2A SDK, HTTP server, JSON-schema validator or tokenizer for --help", async () => {
    const { esm, cjs, files } = await packagesLoaded("help", ["--help"]);
    // Both logs see what was loaded: the message schemas are ES modules, the NATS client CommonJS.
    expect(esm).toContain("zod");
    expect(cjs).toContain("@nats-io/nats-core");
    for (const absent of ["openai", "@modelcontextprotocol/sdk", "@a2a-js/sdk", "express", "ajv", "jose"]) {
      expect(esm).not.toContain(absent);
      expect(cjs).not.toContain(absent);
    }
    // gpt-tokenizer's model list and pre-tokenizer pattern are small; its encoder's rank tables are what weighs.
    expect(files.filter((file) => /gpt-tokenizer\/(esm|cjs)\/(main\.js|bpeRanks\/)/.test(file))).toEqual([]);
  });
});
