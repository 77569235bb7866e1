import { describe, expect, it } from "vitest";
import { commandCheck, templateCommandRefusal, templateCommands } from "../../actors/evaluator/script.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { createParseCache } from "../../machines/language/parse-cache.js";
import type { TemplateDocument } from "../../machines/language/ast.js";

function doc(xml: string): TemplateDocument {
  const parsed = parseTemplate(xml);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.document;
}

const SCRIPT = `<task type="script"><command>python3 check.py {{x}}</command></task>`;
const LOOP = `<task type="director_evaluator_loop">
  <max_iterations>1</max_iterations>
  <director><description>d</description></director>
  <script_execution><command>pytest -q</command></script_execution>
  <evaluator><description>e</description></evaluator>
</task>`;
const CALL_LOOP = LOOP.replace(
  "<command>pytest -q</command>",
  '<call task="system:run_script"><arg>node -e "1" {{director_result}}</arg></call>',
);
const FILE_PATHS = `<task type="sequential"><steps>
  <task><description>a</description><file_paths source="command"><command>git ls-files</command></file_paths></task>
</steps></task>`;

describe("template commands against the allowlist", () => {
  it("finds every command written in a template: script tasks, loop scripts, run_script calls, file_paths commands", () => {
    expect(templateCommands(doc(SCRIPT)).map((c) => c.text)).toEqual(["python3 check.py {{x}}"]);
    expect(templateCommands(doc(LOOP)).map((c) => c.text)).toEqual(["pytest -q"]);
    expect(templateCommands(doc(CALL_LOOP)).map((c) => c.text)).toEqual(['node -e "1" {{director_result}}']);
    expect(templateCommands(doc(FILE_PATHS)).map((c) => c.where)).toEqual(['<file_paths source="command">']);
    expect(templateCommands(doc("<task><description>no commands</description></task>"))).toEqual([]);
  });

  it("checks a shared (cached, frozen) template once per role, and a template a walk may still change every time", () => {
    const cached = createParseCache().parse(LOOP);
    if (!cached.ok) throw new Error(cached.error.message);
    const shared = cached.document;
    const own = doc(LOOP);
    const walked: object[] = [];
    // Every walk of a template's tree reads its entry: counted through a proxy of the document.
    const counting = (document: typeof own) =>
      new Proxy(document, { get: (target, key) => (key === "entry" && walked.push(target), Reflect.get(target, key)) });
    const check = commandCheck(["python3"]);
    const sharedSeen = counting(shared);
    expect(check(sharedSeen)).toMatch(/program 'pytest'/);
    expect(check(sharedSeen)).toMatch(/program 'pytest'/);
    expect(walked.filter((d) => d === shared)).toHaveLength(1);
    const ownSeen = counting(own);
    expect(check(ownSeen)).toMatch(/program 'pytest'/);
    expect(check(ownSeen)).toMatch(/program 'pytest'/);
    expect(walked.filter((d) => d === own)).toHaveLength(2);
    // Another role's allowlist is its own.
    expect(commandCheck(["pytest"])(sharedSeen)).toBeUndefined();
  });

  it("refuses a template whose program is not listed, naming the program, where it is and the setting", () => {
    expect(templateCommandRefusal(doc(SCRIPT), [])).toBe(
      "script task <command>: template commands are off: program 'python3' may not run (set DIRIGENT_COMMANDS to the programs templates may run, e.g. DIRIGENT_COMMANDS=python3,pytest)",
    );
    expect(templateCommandRefusal(doc(LOOP), ["python3"])).toBe(
      "<script_execution> <command>: program 'pytest' is not allowed for template commands (DIRIGENT_COMMANDS=python3; add it there to allow it)",
    );
    expect(templateCommandRefusal(doc(FILE_PATHS), ["python3"])).toMatch(/^<file_paths source="command">: program 'git'/);
    expect(templateCommandRefusal(doc(CALL_LOOP), ["python3"])).toMatch(/program 'node'/);
  });

  it("accepts listed programs, and leaves a program named by a variable to the Handler", () => {
    expect(templateCommandRefusal(doc(SCRIPT), ["python3"])).toBeUndefined();
    expect(templateCommandRefusal(doc(LOOP), ["pytest"])).toBeUndefined();
    expect(templateCommandRefusal(doc(`<task type="script"><command>{{tool}} --version</command></task>`), [])).toBeUndefined();
  });
});
