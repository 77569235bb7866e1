/**
 * docs/embedding.md as a new user meets it: the package as `npm pack` makes it, installed in a project of its own (no
 * access to the sources), each TypeScript example of the guide compiled against it with a tsconfig that names no
 * `types` and with `"types": []` (the default of TypeScript 6 and later), with TypeScript 5 and 7, then run: in-process roles with the
 * offline model, typed results, a client of a `dirigent up` runtime, a TypeScript tool, a service stopped by SIGTERM.
 */
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { MockScript } from "../../runtime/model/mock-script.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";

const run = promisify(execFile);
const REPO = join(import.meta.dirname, "../..");
const GUIDE = readFileSync(join(REPO, "docs/embedding.md"), "utf8");

/** The guide's code blocks of one language, in order. */
const blocks = (lang: string) => [...GUIDE.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1] ?? "");
/** The TypeScript examples, by the file name their first line gives (`// embedded.ts`). */
const EXAMPLES = new Map(
  blocks("ts").flatMap((code) => (/^\/\/ (\w+)\.ts\n/.exec(code) ? [[/^\/\/ (\w+)/.exec(code)?.[1] ?? "", code]] : [])),
);

let dir: string;
let project: string;
let files: string[];
let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dirigent-embedding-"));
  // The package as published: what `files` ships of the built tree (npm test builds first; prepack builds on a real pack).
  const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
    cwd: REPO,
    maxBuffer: 64 << 20,
  });
  const packed = (JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>)[0];
  if (!packed) throw new Error(`npm pack said: ${stdout}`);
  files = packed.files.map((f) => f.path);
  // A project of its own: the package in node_modules, its dependencies where npm would put them, and zod, which the
  // guide installs beside it. No @types package of the project's own.
  project = join(dir, "app");
  const modules = join(project, "node_modules");
  mkdirSync(modules, { recursive: true });
  await run("tar", ["-xzf", join(dir, packed.filename), "-C", modules]);
  renameSync(join(modules, "package"), join(modules, "dirigent"));
  symlinkSync(join(REPO, "node_modules"), join(modules, "dirigent", "node_modules"));
  symlinkSync(join(REPO, "node_modules", "zod"), join(modules, "zod"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", type: "module", private: true }));
  mkdirSync(join(project, "src"));
  for (const [name, code] of EXAMPLES) writeFileSync(join(project, "src", `${name}.ts`), code);

  server = await startTestNatsServer();
  // The guide's tool script, and a JSON answer for the typed example.
  const [toolScript] = blocks("json").filter((b) => b.includes("lookup_order"));
  const script = MockScript.parse(JSON.parse(toolScript ?? "{}"));
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "first program" }, reply: '{"name": "Ada Lovelace", "born": 1815}' },
        ...script.rules,
        { reply: "hello, Ada" },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Compiles the examples with the repository's TypeScript 5 (`typescript`) or 7 (`typescript7`, what `npm install
 * typescript` installs now) and `types` as given (absent: not in the tsconfig); with `libCheck`, the package's
 * declaration files are checked too (slow: every dependency's are).
 */
async function compile(types: string[] | undefined, libCheck: boolean, typescript = "typescript"): Promise<void> {
  const compilerOptions = {
    module: "nodenext",
    target: "es2022",
    strict: true,
    skipLibCheck: !libCheck,
    rootDir: "src",
    outDir: "dist",
    ...(types ? { types } : {}),
  };
  writeFileSync(join(project, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["src"] }));
  const tsc = join(REPO, "node_modules", typescript, "bin", "tsc");
  await run(process.execPath, [tsc, "-p", project], { cwd: project }).catch((err: { stdout?: string }) => {
    throw new Error(`${typescript} tsc failed (types: ${JSON.stringify(types)}):\n${err.stdout ?? String(err)}`);
  });
}

/** The environment of an example: none of the model's settings unless given. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const { OPENAI_API_KEY: _k, OPENAI_BASE_URL: _u, ...rest } = process.env;
  return { ...rest, DIRIGENT_LOG_LEVEL: "silent", ...extra };
}

/** Runs a compiled example to its end; its exit code and stdout. */
function example(name: string, extra: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; output: string }> {
  const child = spawn(process.execPath, [join(project, "dist", `${name}.js`)], {
    cwd: project,
    env: env(extra),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let output = "";
  child.stdout.on("data", (c: Buffer) => ((stdout += c.toString()), (output += c.toString())));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, output })));
}

const model = () => ({ OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test" });

describe("docs/embedding.md from the packed package", () => {
  it("ships the built library, its types and the guide, and builds on prepack", () => {
    expect(files).toEqual(
      expect.arrayContaining(["dist/runtime/index.js", "dist/runtime/index.d.ts", "dist/protocol/index.d.ts", "docs/embedding.md"]),
    );
    const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(manifest.scripts["prepack"]).toMatch(/npm run build/);
    expect(manifest.dependencies["@types/node"]).toBeDefined();
    expect([...EXAMPLES.keys()].sort()).toEqual(["embedded", "remote", "service", "tool", "typed"]);
  });

  it("compiles every example with types: [] (the default of TypeScript 6 and later), declaration files checked", async () => {
    await compile([], true);
    expect(readdirSync(join(project, "dist")).sort()).toEqual(["embedded.js", "remote.js", "service.js", "tool.js", "typed.js"]);
  });

  it("compiles every example with no types listed (TypeScript 5's default)", async () => {
    await compile(undefined, false);
  });

  it("compiles every example with TypeScript 7 and no types listed, declaration files checked", async () => {
    rmSync(join(project, "dist"), { recursive: true, force: true });
    await compile(undefined, true, "typescript7");
    expect(readdirSync(join(project, "dist")).sort()).toEqual(["embedded.js", "remote.js", "service.js", "tool.js", "typed.js"]);
  });

  it("runs the examples", async () => {
    const embedded = await example("embedded");
    expect(embedded.code, embedded.output).toBe(0);
    expect(embedded.output).toMatch(/offline mock model at http:\/\/127\.0\.0\.1:\d+\/v1/);
    expect(embedded.stdout).toMatch(/^task \S+ accepted$/m);
    expect(embedded.stdout).toMatch(/\[1\] queued task\.queued[\s\S]*result: COMPLETE\nSmall actors listen/);

    const typed = await example("typed", model());
    expect(typed.code, typed.output).toBe(0);
    expect(typed.stdout).toBe("Ada Lovelace, born 1815\n");

    const tool = await example("tool", model());
    expect(tool.code, tool.output).toBe(0);
    expect(tool.stdout).toBe("result: COMPLETE\nYour order: shipped on 3 March.\n");

    const root = randomRoot();
    const up = startCli(["up", "--nats", server.url, "--prefix", root], model());
    try {
      await up.waitFor(/ready/);
      const remote = await example("remote", { NATS_URL: server.url, DIRIGENT_PREFIX: root });
      expect(remote.code, remote.output).toBe(0);
      expect(remote.stdout).toMatch(/^task greeting-\d+ accepted$/m);
      expect(remote.stdout).toMatch(/\[1\] queued task\.queued[\s\S]*result: COMPLETE\nstate: completed\n$/);

      const service = spawn(process.execPath, [join(project, "dist", "service.js")], {
        cwd: project,
        env: env({ ...model(), NATS_URL: server.url, DIRIGENT_PREFIX: root }),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let said = "";
      const exited = new Promise<number | null>((resolve) => service.on("exit", resolve));
      await new Promise<void>((resolve, reject) => {
        service.stdout.on("data", (c: Buffer) => {
          said += c.toString();
          if (said.includes("ready")) resolve();
        });
        service.stderr.on("data", (c: Buffer) => (said += c.toString()));
        void exited.then(() => reject(new Error(`service.js exited: ${said}`)));
      });
      expect(said).toContain("roles evaluator, handler ready");
      service.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(said).toMatch(/stopped\n$/);
    } finally {
      await up.stop();
    }
  });
});
