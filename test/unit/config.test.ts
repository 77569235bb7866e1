import { describe, expect, it } from "vitest";
import { ConfigError, DEFAULTS, loadConfig } from "../../runtime/config.js";

describe("config", () => {
  it("uses defaults when nothing is set", () => {
    const config = loadConfig({}, {});
    expect(config).toMatchObject({ prefix: "dirigent", concurrency: DEFAULTS.concurrency, model: DEFAULTS.model });
    expect(config.nats).toBeUndefined();
  });

  it("takes flags over environment over defaults", () => {
    const env = { DIRIGENT_PREFIX: "fromenv", DIRIGENT_CONCURRENCY: "3", NATS_URL: "nats://env:4222" };
    expect(loadConfig({}, env)).toMatchObject({ prefix: "fromenv", concurrency: 3, nats: "nats://env:4222" });
    expect(loadConfig({ prefix: "fromflag", concurrency: "7" }, env)).toMatchObject({ prefix: "fromflag", concurrency: 7 });
  });

  it("names the flag and the bad value", () => {
    expect(() => loadConfig({ concurrency: "lots" }, {})).toThrow(/flag --concurrency: .*got 'lots'/);
    expect(() => loadConfig({ prefix: "Bad Root" }, {})).toThrow(ConfigError);
  });

  it("switches local dispatch off with DIRIGENT_LOCAL_DISPATCH, and refuses a value that is no switch", () => {
    expect(loadConfig({}, {}).localDispatch).toBe(true);
    expect(loadConfig({}, { DIRIGENT_LOCAL_DISPATCH: "off" }).localDispatch).toBe(false);
    expect(() => loadConfig({}, { DIRIGENT_LOCAL_DISPATCH: "sometimes" })).toThrow(
      /environment variable DIRIGENT_LOCAL_DISPATCH: .*got 'sometimes'/,
    );
  });

  it("sends model requests over dirigent's HTTP/1.1 client unless DIRIGENT_MODEL_HTTP says node or global, and refuses another client", () => {
    expect(loadConfig({}, {}).modelHttp).toBe("http1");
    expect(loadConfig({}, { DIRIGENT_MODEL_HTTP: "node" }).modelHttp).toBe("node");
    expect(loadConfig({}, { DIRIGENT_MODEL_HTTP: "global" }).modelHttp).toBe("global");
    expect(() => loadConfig({}, { DIRIGENT_MODEL_HTTP: "curl" })).toThrow(/environment variable DIRIGENT_MODEL_HTTP: .*got 'curl'/);
  });

  it("offers run_subtask and request_user_input by default; DIRIGENT_CONTINUATION_TOOLS adds the spawn tools or refuses a kind it does not know", () => {
    expect(loadConfig({}, {}).continuationTools).toEqual(["subtask", "input"]);
    expect(loadConfig({}, { DIRIGENT_CONTINUATION_TOOLS: "subtask,spawn,input" }).continuationTools).toEqual(["subtask", "spawn", "input"]);
    expect(() => loadConfig({}, { DIRIGENT_CONTINUATION_TOOLS: "subtask,fork" })).toThrow(/DIRIGENT_CONTINUATION_TOOLS/);
  });

  it("names the environment variable, and never prints the API key", () => {
    expect(() => loadConfig({}, { DIRIGENT_MAX_TURNS: "0" })).toThrow(/environment variable DIRIGENT_MAX_TURNS/);
    expect(() => loadConfig({}, { OPENAI_BASE_URL: "not a url", OPENAI_API_KEY: "sk-secret" })).toThrow(/OPENAI_BASE_URL/);
    const attempt = () => loadConfig({}, { OPENAI_API_KEY: "sk-secret", DIRIGENT_LOG_LEVEL: "loud" });
    expect(attempt).toThrow(/DIRIGENT_LOG_LEVEL/);
    expect(attempt).not.toThrow(/sk-secret/);
  });
});

describe("config of the Handler's tools and limits", () => {
  it("parses lists, JSON price tables, booleans and fractions from the environment", () => {
    const config = loadConfig(
      {},
      {
        DIRIGENT_TOOLS: "read_file, run_script",
        DIRIGENT_MODEL_PRICES: '{"gpt-4o-mini":{"input":0.15,"output":0.6}}',
        DIRIGENT_STREAM: "true",
        DIRIGENT_MAX_CONTEXT_WINDOW_FRACTION: "0.5",
        DIRIGENT_MAX_OUTPUT_TOKENS: "4096",
      },
    );
    expect(config.tools).toEqual(["read_file", "run_script"]);
    expect(config.modelPrices).toEqual({ "gpt-4o-mini": { input: 0.15, output: 0.6 } });
    expect(config.streamDeltas).toBe(true);
    expect(config.maxContextWindowFraction).toBe(0.5);
    expect(config.maxOutputTokens).toBe(4096);
    expect(loadConfig({}, {}).maxOutputTokens).toBe(0);
  });

  it("keeps template commands off, programs sandboxed and offline by default; reads the allowlist and the sandbox settings", () => {
    expect(loadConfig({}, {})).toMatchObject({ commands: [], sandbox: "bwrap", sandboxNetwork: "off", sandboxReadOnly: [] });
    const config = loadConfig(
      {},
      {
        DIRIGENT_COMMANDS: "python3, pytest,/usr/bin/make",
        DIRIGENT_SANDBOX: "unsandboxed",
        DIRIGENT_SANDBOX_NETWORK: "on",
        DIRIGENT_SANDBOX_RO_BIND: "/opt/venv",
      },
    );
    expect(config).toMatchObject({
      commands: ["python3", "pytest", "/usr/bin/make"],
      sandbox: "unsandboxed",
      sandboxNetwork: "on",
      sandboxReadOnly: ["/opt/venv"],
    });
  });

  it.each([
    ["DIRIGENT_TOOLS", "read_file,web.search"],
    ["DIRIGENT_MODEL_PRICES", "{not json"],
    ["DIRIGENT_STREAM", "perhaps"],
    ["DIRIGENT_MAX_CONTEXT_WINDOW_FRACTION", "1.5"],
    ["DIRIGENT_MAX_OUTPUT_TOKENS", "-1"],
    ["DIRIGENT_COMMANDS", "python3 -c"],
    ["DIRIGENT_SANDBOX", "none"],
    ["DIRIGENT_SANDBOX_NETWORK", "maybe"],
    ["DIRIGENT_SANDBOX_RO_BIND", "relative/dir"],
  ])("names %s when its value %j is invalid", (name, value) => {
    expect(() => loadConfig({}, { [name]: value })).toThrow(new RegExp(`environment variable ${name}`));
  });
});

describe("config of the template library", () => {
  it("defaults to 'templates', reads DIRIGENT_TEMPLATES and --templates, and refuses an empty name", () => {
    expect(loadConfig({}, {}).templates).toBe("templates");
    expect(loadConfig({}, { DIRIGENT_TEMPLATES: "lib/tpl" }).templates).toBe("lib/tpl");
    expect(loadConfig({ templates: "flag/dir" }, { DIRIGENT_TEMPLATES: "lib/tpl" }).templates).toBe("flag/dir");
    expect(() => loadConfig({ templates: "  " }, {})).toThrow(/flag --templates: must name a directory/);
  });

  it("reads DIRIGENT_ENV_INPUTS as variable names, refusing those that look like secrets", () => {
    expect(loadConfig({}, {}).envInputs).toEqual([]);
    expect(loadConfig({}, { DIRIGENT_ENV_INPUTS: "REGION, DEPLOY_STAGE" }).envInputs).toEqual(["REGION", "DEPLOY_STAGE"]);
    for (const name of ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "NATS_PASSWORD", "LD_PRELOAD", "AWS_SECRET_ACCESS_KEY"])
      expect(() => loadConfig({}, { DIRIGENT_ENV_INPUTS: `REGION,${name}` })).toThrow(
        new RegExp(`DIRIGENT_ENV_INPUTS.*'${name}' looks like a secret`),
      );
    expect(() => loadConfig({}, { DIRIGENT_ENV_INPUTS: "not-a-name" })).toThrow(/must be variable names/);
  });
});
