import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { silentLogger } from "../../../actors/deps.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeTools, ToolSourceError, type ComposedTools } from "../../../runtime/tools/source.js";
import { loadMcpConfig, parseMcpConfig } from "../../../runtime/tools/mcp-config.js";
import { formatResult, mcpToolName, startMcpSources } from "../../../runtime/tools/mcp.js";
import { startTestMcpServer, type TestMcpServer } from "../../support/mcp-http-server.js";
import type { ToolCall } from "../../../machines/handler/session.js";
import { listTools } from "../../../runtime/cli/tools.js";
import { createToolset } from "../../../runtime/tools/toolset.js";
import { configuredSources } from "../../../runtime/tools/configured.js";
import { dirname } from "node:path";

const signal = new AbortController().signal;
const call = (name: string, args: unknown): ToolCall => ({
  id: "c1",
  type: "function",
  function: { name, arguments: JSON.stringify(args) },
});
/** The reference filesystem server from npm (a devDependency), run by this Node. */
export const FS_SERVER = createRequire(import.meta.url).resolve("@modelcontextprotocol/server-filesystem/dist/index.js");

let dir: string;
let http: TestMcpServer;
let tools: ComposedTools;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-mcp-"));
  await writeFile(join(dir, "notes.txt"), "the notes\n");
  http = await startTestMcpServer();
  // A secret of the Handler's environment: a stdio server must not see it.
  process.env["DIRIGENT_TEST_SECRET"] = "handler-secret";
  const config = parseMcpConfig(
    {
      mcpServers: {
        fs: { command: process.execPath, args: [FS_SERVER, dir], env: { SEEN: "yes" } },
        web: { url: http.url, headers: { Authorization: "Bearer ${DIRIGENT_TEST_MCP_TOKEN}" }, timeoutMs: 300 },
        off: { command: "nonexistent-program", disabled: true },
      },
    },
    "test",
    { DIRIGENT_TEST_MCP_TOKEN: "t0ken-from-env" },
  );
  tools = composeTools(await startMcpSources(config), { maxResultBytes: 4096 });
});

afterAll(async () => {
  await tools?.close();
  await http?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("MCP servers", () => {
  it("offers the tools of a stdio server (the reference filesystem server) and of a Streamable HTTP server as SERVER__TOOL", () => {
    const names = tools.definitions.map((d) => d.function.name);
    expect(names).toEqual(expect.arrayContaining(["fs__read_text_file", "fs__write_file", "fs__list_directory", "web__echo", "web__hang"]));
    expect(names.some((n) => n.startsWith("off__"))).toBe(false);
    const read = tools.definitions.find((d) => d.function.name === "fs__read_text_file");
    expect(read?.function.description).toMatch(/file/i);
    expect(read?.function.parameters).toMatchObject({ type: "object", properties: { path: { type: "string" } } });
    expect(tools.info("fs__read_text_file")).toEqual({ source: "mcp", idempotent: true });
    expect(tools.info("fs__edit_file")).toEqual({ source: "mcp", idempotent: false });
    expect(tools.info("fs__write_file")).toEqual({ source: "mcp", idempotent: true });
  });

  it("calls a stdio server's tool and answers its text", async () => {
    expect(await tools.run(call("fs__read_text_file", { path: join(dir, "notes.txt") }), signal)).toEqual({
      malformed: false,
      content: "the notes\n",
    });
    const outside = await tools.run(call("fs__read_text_file", { path: "/etc/passwd" }), signal);
    expect(outside.content).toMatch(/^error: .*(denied|outside|not allowed)/i);
  });

  it("answers text, describes images, reads structured content, passes isError as an error, sends the configured headers", async () => {
    expect((await tools.run(call("web__echo", { text: "hi" }), signal)).content).toBe("echo: hi");
    expect((await tools.run(call("web__picture", {}), signal)).content).toBe("[image: image/png, 1234 bytes, not shown]\na blank picture");
    expect((await tools.run(call("web__fails", {}), signal)).content).toBe("error: the database is down");
    expect((await tools.run(call("web__stats", {}), signal)).content).toBe('{"count":3}');
    expect(http.headers.some((h) => h["authorization"] === "Bearer t0ken-from-env")).toBe(true);
  });

  it("masks the values a configuration took from the environment in every answer", async () => {
    const sources = await startMcpSources(
      parseMcpConfig({ mcpServers: { web: { url: http.url, headers: { "X-Token": "${TOK}" } } } }, "t", { TOK: "t0ken-from-env" }),
    );
    const set = await createToolset(
      {
        workspaceRoot: dir,
        enabled: [],
        readMaxBytes: 1024,
        listMaxEntries: 10,
        scriptTimeoutMs: 1000,
        scriptKillGraceMs: 100,
        scriptOutputMaxBytes: 1024,
        scriptEnv: ["PATH"],
      },
      undefined,
      { sources },
    );
    try {
      expect((await set.run(call("web__echo", { text: "the token is t0ken-from-env" }), signal)).content).toBe(
        "echo: the token is [redacted]",
      );
    } finally {
      await set.close?.();
    }
  });

  it('starts a server with "sandbox": true in the sandbox of run_script: the workspace and read-only paths, nothing else', async () => {
    const outside = await mkdtemp(join(tmpdir(), "dirigent-mcp-outside-"));
    await writeFile(join(outside, "secret.txt"), "outside the workspace");
    const file = join(dir, "boxed.json");
    // The server may read anything ("/"); the sandbox shows it only the workspace, the system and its own package.
    const config = {
      mcpServers: {
        boxed: { command: process.execPath, args: [FS_SERVER, "/"], sandbox: true },
        open: { command: process.execPath, args: [FS_SERVER, "/"] },
      },
    };
    await writeFile(file, JSON.stringify(config));
    const packages = dirname(dirname(dirname(dirname(FS_SERVER))));
    const sources = await configuredSources({
      mcpConfig: file,
      workspaceRoot: dir,
      sandbox: "bwrap",
      sandboxNetwork: "off",
      sandboxReadOnly: [packages],
      dataDir: join(dir, ".data"),
    });
    const set = composeTools(sources);
    try {
      expect((await set.run(call("boxed__read_text_file", { path: join(dir, "notes.txt") }), signal)).content).toBe("the notes\n");
      expect((await set.run(call("boxed__read_text_file", { path: join(outside, "secret.txt") }), signal)).content).toMatch(
        /^error: .*(ENOENT|no such file|not exist)/i,
      );
      expect((await set.run(call("open__read_text_file", { path: join(outside, "secret.txt") }), signal)).content).toBe(
        "outside the workspace",
      );
    } finally {
      await set.close();
      await rm(outside, { recursive: true, force: true });
    }
  });

  it("answers a hanging tool with a timeout error (the server's timeoutMs)", async () => {
    const answer = await tools.run(call("web__hang", {}), signal);
    expect(answer).toEqual({ malformed: false, content: expect.stringMatching(/^error: 'web__hang' did not answer within 300 ms/) });
  });

  it("starts a stdio server with only its env (no secret of the Handler's), and again when it died: the next call answers", async () => {
    // The filesystem server's process is the only child of this one running it.
    const { execFileSync } = await import("node:child_process");
    const pids = execFileSync("pgrep", ["-P", String(process.pid), "-f", FS_SERVER])
      .toString()
      .trim()
      .split("\n")
      .map(Number);
    const environ = (await import("node:fs")).readFileSync(`/proc/${pids[0]}/environ`, "utf8").split("\0");
    expect(environ).toContain("SEEN=yes");
    expect(environ.some((v) => v.startsWith("DIRIGENT_TEST_SECRET="))).toBe(false);
    for (const pid of pids) process.kill(pid, "SIGKILL");
    // The call right after the kill may meet the dying connection; one after it has closed starts the server again.
    let answer = await tools.run(call("fs__read_text_file", { path: join(dir, "notes.txt") }), signal);
    for (let i = 0; i < 50 && answer.content !== "the notes\n"; i++)
      answer = await tools.run(call("fs__read_text_file", { path: join(dir, "notes.txt") }), signal);
    expect(answer.content).toBe("the notes\n");
  });

  it("refuses a bad configuration with the file and key, and a server that does not start with its command", async () => {
    const file = join(dir, "mcp.json");
    await writeFile(
      file,
      JSON.stringify({
        mcpServers: {
          a: { command: 3 },
          b: { url: "ftp://x" },
          c: { args: [] },
          d: { command: "x", env: { K: "${DIRIGENT_TEST_UNSET_VAR}" } },
        },
      }),
    );
    const error = await loadMcpConfig(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolSourceError);
    const message = (error as Error).message;
    expect(message).toContain(`MCP configuration ${file}:`);
    expect(message).toMatch(/mcpServers\.a\.command: /);
    expect(message).toMatch(/mcpServers\.b\.url: /);
    expect(message).toMatch(/mcpServers\.c: needs either "command" \(a stdio server\) or "url"/);
    expect(message).toMatch(/mcpServers\.d\.env\.K: the environment variable DIRIGENT_TEST_UNSET_VAR is not set/);
    await writeFile(file, "{ not json");
    await expect(loadMcpConfig(file)).rejects.toThrow(/not JSON/);
    await expect(loadMcpConfig(join(dir, "missing.json"))).rejects.toThrow(/cannot read it \(ENOENT\)/);
    await expect(
      startMcpSources(
        parseMcpConfig(
          { mcpServers: { broken: { command: process.execPath, args: ["-e", "console.error('no config'); process.exit(3)"] } } },
          "t",
        ),
      ),
    ).rejects.toThrow(/MCP server 'broken' \('.*node -e .*'\) did not start: .*its stderr: no config/);
    // A server that starts but never answers: refused at the start timeout.
    await expect(
      startMcpSources(
        parseMcpConfig({ mcpServers: { mute: { command: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] } } }, "t"),
        { startTimeoutMs: 300 },
      ),
    ).rejects.toThrow(/MCP server 'mute' .* did not start: no answer within 300 ms/);
  });

  it("leaves out a tool whose input schema is not valid JSON Schema, logged; checks arguments against the schema of the others", async () => {
    const logged: string[] = [];
    const log = { ...silentLogger, error: (_o: object, msg?: string) => logged.push(msg ?? "") };
    const server = fileURLToPath(new URL("../../support/mcp-bad-schema-server.mjs", import.meta.url));
    const set = composeTools(
      await startMcpSources(parseMcpConfig({ mcpServers: { odd: { command: process.execPath, args: [server] } } }, "t"), { log }),
    );
    try {
      expect(set.definitions.map((d) => d.function.name)).toEqual(["odd__good"]);
      expect(logged).toEqual([
        expect.stringMatching(
          /^MCP server 'odd': tool 'bad' left out: its input schema is not a usable JSON Schema \(type must be JSONType/,
        ),
      ]);
      expect(await set.run(call("odd__good", { n: "three" }), signal)).toEqual({
        malformed: true,
        content: "error: invalid arguments for 'odd__good': data/n must be integer",
      });
      expect(await set.run(call("odd__good", { n: 3 }), signal)).toEqual({ malformed: false, content: 'good: {"n":3}' });
    } finally {
      await set.close();
    }
  });

  it("names tools within the chat-completions rules", () => {
    expect(mcpToolName("my server", "get.weather")).toBe("my_server__get_weather");
    const long = mcpToolName("s".repeat(40), "t".repeat(40));
    expect(long).toMatch(/^[a-zA-Z0-9_-]{64}$/);
    expect(long).not.toBe(mcpToolName("s".repeat(40), "t".repeat(41)));
    expect(
      formatResult({
        content: [
          { type: "resource", resource: { uri: "file:///a", mimeType: "text/plain", text: "A" } },
          { type: "resource_link", uri: "file:///b", name: "b" },
        ],
      }),
    ).toBe("[resource file:///a, text/plain]\nA\n[resource link: file:///b (b)]");
  });

  it("lists the tools of a configuration with their source (dirigent tools list), and refuses names that collide", async () => {
    const file = join(dir, "list.json");
    await writeFile(file, JSON.stringify({ mcpServers: { fs: { command: process.execPath, args: [FS_SERVER, dir] } } }));
    const listed = await listTools({ mcpConfig: file }, { DIRIGENT_TOOLS: "read_file,run_script" });
    expect(listed.slice(0, 2).map((t) => [t.name, t.source, t.idempotent])).toEqual([
      ["read_file", "builtin", true],
      ["run_script", "builtin", false],
    ]);
    expect(listed.find((t) => t.name === "fs__read_text_file")).toMatchObject({
      source: "mcp",
      origin: "fs",
      idempotent: true,
      parameters: { type: "object" },
    });
    // Two servers whose names sanitise alike: their tools' names collide, refused with both sources named.
    await writeFile(file, JSON.stringify({ mcpServers: { "web.": { url: http.url }, web_: { url: http.url } } }));
    await expect(listTools({ mcpConfig: file }, {})).rejects.toThrow(
      "tool name 'web___echo' is offered by both the MCP server 'web.' and the MCP server 'web_'",
    );
  });
});
