/** The template library: loading with located errors, the name and `type:subtype` registry, and matching (Jaccard word overlap). */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, type LibraryTemplate, libraryFromXml, loadLibrary } from "../../../actors/library/library.js";
import { jaccard, wordSet } from "../../../actors/library/match.js";
import { parseTemplate } from "../../../machines/language/parse.js";
import { CORPUS_DIR } from "../../support/corpus.js";

const STARTER = join(import.meta.dirname, "../../../templates");
const CORPUS = CORPUS_DIR;

let dir: string;

function write(rel: string, text: string): string {
  const path = join(dir, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return path;
}

function atomic(name: string, description: string, subtype?: string): { file: string; xml: string } {
  return {
    file: `${name}.xml`,
    xml: `<task name="${name}"${subtype ? ` subtype="${subtype}"` : ""}><description>${description}</description></task>`,
  };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "dirigent-library-"));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("loading a template directory", () => {
  it("reads *.xml recursively in path order, skips hidden entries and reports a malformed file with file, line and column", async () => {
    const root = join(dir, "lib");
    write("lib/b/summarize.xml", '<task name="summarize"><description>Summarize {{text}}</description></task>');
    write("lib/a.xml", '<task subtype="subtask">\n  <description>Do {{description}}</description>\n</task>');
    write("lib/bad.xml", "<task>\n  <description>unclosed\n</task>");
    write("lib/.hidden/x.xml", "<task/>");
    write("lib/notes.txt", "not a template");
    symlinkSync(join(root, "a.xml"), join(root, "link.xml"));

    const { library, errors } = await loadLibrary(root);
    expect(errors).toEqual([
      {
        file: join(root, "bad.xml"),
        line: 3,
        col: 1,
        message: expect.stringMatching(/'<\/task>' closes '<description>' opened at line 2, col 3/),
      },
    ]);
    // The symlink registers a.xml's unnamed task again, under its own base name.
    expect(library.templates.map((t) => [t.name, t.file])).toEqual([
      ["a", join(root, "a.xml")],
      ["summarize", join(root, "b/summarize.xml")],
      ["link", join(root, "link.xml")],
    ]);
    expect(library.get("a")).toMatchObject({ type: "atomic", subtype: "subtask", description: "Do {{description}}" });
  });

  it("gives an empty library for a missing directory, and an error naming it when the directory is required", async () => {
    const missing = join(dir, "nowhere");
    expect((await loadLibrary(missing)).errors).toEqual([]);
    expect((await loadLibrary(missing)).library.templates).toEqual([]);
    expect((await loadLibrary(missing, { required: true })).errors).toEqual([
      { file: missing, message: `templates directory '${missing}' does not exist` },
    ]);
    await expect(loadLibrary("")).rejects.toThrow(/non-empty string/);
  });

  it("loads one .xml file given instead of a directory, and refuses other files", async () => {
    const file = write("single.xml", '<task name="one"><description>one</description></task>');
    expect((await loadLibrary(file)).library.templates.map((t) => t.name)).toEqual(["one"]);
    const text = write("single.txt", "x");
    expect((await loadLibrary(text)).errors[0]?.message).toMatch(/not a directory or an .xml file/);
  });

  it("reports a duplicate name with both files and keeps the first definition", () => {
    const { library, errors } = libraryFromXml([
      { file: "lib/one.xml", xml: '<task name="review"><description>first</description></task>' },
      { file: "lib/two.xml", xml: '<!-- c -->\n<task name="review"><description>second</description></task>' },
    ]);
    expect(errors).toEqual([
      { file: "lib/two.xml", line: 2, col: 1, message: "duplicate template name 'review': already defined in lib/one.xml:1:1" },
    ]);
    expect(library.get("review")?.description).toBe("first");
    expect(() => createLibrary([...library.templates, { ...library.templates[0]!, file: "other.xml" }])).toThrow(
      /duplicate template name 'review': defined in lib\/one.xml and other.xml/,
    );
  });

  it("registers function templates, named tasks, a library's tasks and the file's unnamed task under its base name", () => {
    const xml = [
      '<template name="translate" params="text, language"><task><description>Translate into {{language}}: {{text}}</description></task></template>',
      '<task name="shout" parameters="text"><description>Shout {{text}}</description></task>',
      '<task name="greet"><description>Greet {{who}}</description></task>',
      '<library><task name="wave" subtype="gesture"><description>Wave</description></task><task><description>lost</description></task></library>',
      "<task><description>the file itself</description></task>",
      '<call template="translate"><arg>"hi"</arg><arg>"French"</arg></call>',
    ].join("\n");
    const { library, errors, warnings } = libraryFromXml([{ file: "dir/multi.xml", xml }]);
    expect(library.templates.map((t) => `${t.name}=${t.type}${t.subtype ? `:${t.subtype}` : ""}`)).toEqual([
      "translate=atomic",
      "shout=atomic",
      "greet=atomic",
      "wave=atomic:gesture",
      "multi=atomic",
    ]);
    expect(errors).toEqual([
      {
        file: "dir/multi.xml",
        line: 6,
        col: 1,
        message: "a second unnamed <call>: the name 'multi' is taken by the one at line 5; give this one a name attribute",
      },
    ]);
    expect(warnings).toContainEqual(
      expect.objectContaining({ file: "dir/multi.xml", line: 4, message: expect.stringMatching(/unnamed <task> in <library>/) }),
    );

    const multi = library.get("multi")!;
    expect(multi.document.entry).toBe(multi.document.nodes[0]);
    expect(multi.document.templates.map((t) => t.name)).toEqual(["translate", "shout"]);
    // The xml of a template that is not the file's entry runs that template, with the file's function templates.
    const description = (text: string) => {
      const outcome = parseTemplate(text);
      return outcome.ok && outcome.document.entry?.kind === "task"
        ? [outcome.document.entry.description, outcome.document.templates.map((t) => t.name)]
        : [];
    };
    expect(description(multi.xml)).toEqual(["the file itself", ["translate", "shout"]]);
    expect(description(library.get("wave")!.xml)).toEqual(["Wave", ["translate", "shout"]]);
    expect(description(library.get("translate")!.xml)).toEqual(["Translate into {{language}}: {{text}}", ["translate", "shout"]]);
    expect(library.get("greet")!.xml).toBe(xml);
  });

  it("reports a file that parses but defines nothing to register", () => {
    const { errors } = libraryFromXml([
      { file: "frag.xml", xml: "<context_management><accumulate_data>true</accumulate_data></context_management>" },
    ]);
    expect(errors).toEqual([{ file: "frag.xml", line: 1, col: 1, message: "defines no task or template to register" }]);
  });

  it("validates its inputs with a clear error", () => {
    expect(() => libraryFromXml("x" as never)).toThrow(/entries must be an array/);
    expect(() => libraryFromXml([{ file: "a.xml" } as never])).toThrow(/entry 0 must be \{ file: string, xml: string \}/);
    expect(() => createLibrary([{ name: "" } as never])).toThrow(/template 0: name must be a non-empty string/);
    const { library } = libraryFromXml([atomic("a", "x")]);
    expect(() => library.match(3 as never)).toThrow(/query must be a string/);
    expect(() => library.match("x", { limit: 0 })).toThrow(/limit must be a positive integer, got '0'/);
    expect(() => library.match("x", { hints: "a" as never })).toThrow(/hints must be an array of strings/);
    expect(() => library.byType("")).toThrow(/type must be a non-empty string/);
  });
});

describe("the type:subtype registry", () => {
  const { library } = libraryFromXml([
    atomic("judge", "judge the work", "evaluator"),
    atomic("plain", "do the work"),
    atomic("tests", "judge the tests", "evaluator"),
    { file: "seq.xml", xml: '<task name="seq" type="sequential"><steps><task><description>a</description></task></steps></task>' },
  ]);

  it("finds templates by type, by type and subtype, and by 'type:subtype'", () => {
    const names = (list: readonly LibraryTemplate[]) => list.map((t) => t.name);
    expect(names(library.byType("atomic", "evaluator"))).toEqual(["judge", "tests"]);
    expect(names(library.byType("atomic:evaluator"))).toEqual(["judge", "tests"]);
    expect(names(library.byType("atomic"))).toEqual(["judge", "plain", "tests"]);
    expect(names(library.byType("sequential"))).toEqual(["seq"]);
    expect(library.byType("atomic", "nothing")).toEqual([]);
    expect(library.get("seq")?.type).toBe("sequential");
    expect(library.get("none")).toBeUndefined();
  });
});

describe("matching (Jaccard word overlap)", () => {
  it("splits words lower-cased with punctuation stripped and stopwords left out", () => {
    expect([...wordSet("Summarize THE {{director_output}}, don't stop!")]).toEqual(["summarize", "director", "output", "dont", "stop"]);
    expect(jaccard(new Set(["a", "b"]), new Set(["b", "c"]))).toBeCloseTo(1 / 3);
    expect(jaccard(new Set(), new Set())).toBe(0);
  });

  it("scores the overlap of query and description plus name, keeps scores above 0.1, best first", () => {
    const { library } = libraryFromXml([
      atomic("summarize", "summarize text"),
      atomic("translate", "translate text into french"),
      atomic("unrelated", "compile rust code quickly with cargo build"),
    ]);
    const found = library.match("summarize this text");
    expect(found.map((m) => m.template.name)).toEqual(["summarize", "translate"]);
    // query {summarize, text}; summarize: {summarize, text} → 1; translate: {translate, text, french} → 1/4
    expect(found[0]?.score).toBe(1);
    expect(found[1]?.score).toBeCloseTo(0.25);
    expect(library.match("nothing in common")).toEqual([]);
  });

  it("returns at most five by default, keeps load order on ties, and honours limit", () => {
    const entries = ["a", "b", "c", "d", "e", "f", "g"].map((n) => atomic(`t${n}`, "review code"));
    const { library } = libraryFromXml(entries);
    expect(library.match("review code").map((m) => m.template.name)).toEqual(["ta", "tb", "tc", "td", "te"]);
    expect(library.match("review code", { limit: 2 }).map((m) => m.template.name)).toEqual(["ta", "tb"]);
  });

  it("matches atomic tasks only unless asked, and filters by type and subtype", () => {
    const { library } = libraryFromXml([
      atomic("judge", "check the code", "evaluator"),
      atomic("write", "write the code", "subtask"),
      {
        file: "seq.xml",
        xml: '<task name="seq" type="sequential"><description>check code steps</description><steps><task/></steps></task>',
      },
    ]);
    expect(library.match("check code").map((m) => m.template.name)).toEqual(["judge", "write"]);
    expect(library.match("check code", { subtype: "evaluator" }).map((m) => m.template.name)).toEqual(["judge"]);
    expect(library.match("check code", { atomicOnly: false }).map((m) => m.template.name)).toEqual(["judge", "seq", "write"]);
    expect(library.match("check code", { type: "sequential" }).map((m) => m.template.name)).toEqual(["seq"]);
  });

  it("boosts a template a hint names exactly or in part, and counts the hints' words", () => {
    const { library } = libraryFromXml([
      atomic("code_review", "review code"),
      atomic("style_check", "lint style"),
      atomic("other", "something else"),
    ]);
    const exact = library.match("review code", { hints: ["style_check"] });
    expect(exact.map((m) => m.template.name)).toEqual(["style_check", "code_review"]);
    expect(exact[0]?.score).toBeGreaterThan(0.5);
    expect(library.match("unrelated words", { hints: ["style"] }).map((m) => m.template.name)).toEqual(["style_check"]);
    expect(library.match("something", { hints: ["OTHER"] })[0]?.template.name).toBe("other");
  });

  it("keeps the five best of 2,000 templates, best first", () => {
    const [model] = libraryFromXml([atomic("model", "x")]).library.templates;
    const library = createLibrary(
      Array.from({ length: 2000 }, (_, i) => ({
        ...model!,
        name: `t${i}`,
        description: `task number ${i} about topic ${i % 37} and data ${i % 11}`,
      })),
    );
    const found = library.match("a task about topic 5 and data 3");
    expect(found).toHaveLength(5);
    expect(found.map((m) => m.score)).toEqual([...found.map((m) => m.score)].sort((a, b) => b - a));
  });
});

describe("the starter library (templates/)", () => {
  it("validates, and registers its evaluators and the generic subtask", async () => {
    const { library, errors } = await loadLibrary(STARTER, { required: true });
    expect(errors).toEqual([]);
    expect(
      library
        .byType("atomic", "evaluator")
        .map((t) => t.name)
        .sort(),
    ).toEqual(["evaluate-output", "run-tests-evaluation"]);
    expect(library.byType("atomic", "subtask").map((t) => t.name)).toEqual(["subtask-generic"]);
    expect(library.get("summarize")?.type).toBe("atomic");
  });

  it("matches task descriptions to the right starter template", async () => {
    const { library } = await loadLibrary(STARTER);
    expect(library.match("summarize the key points of this article")[0]?.template.name).toBe("summarize");
    expect(library.match("evaluate whether the output meets the criteria", { subtype: "evaluator" })[0]?.template.name).toBe(
      "evaluate-output",
    );
    expect(library.match("evaluate the test run results: exit code and output", { subtype: "evaluator" })[0]?.template.name).toBe(
      "run-tests-evaluation",
    );
    expect(library.match("carry out a subtask", { subtype: "subtask" })[0]?.template.name).toBe("subtask-generic");
  });
});

describe("the seeds-xml corpus as a library", () => {
  it("loads without throwing, and every file that does not parse is reported with line and column", async () => {
    const { library, errors } = await loadLibrary(join(CORPUS, "templates"), { required: true });
    expect(library.templates.length).toBeGreaterThan(50);
    for (const id of ["4c9ea69cd436", "7bbac7b2b8d8", "f00380213f0a"]) {
      const error = errors.find((e) => e.file.endsWith(`${id}.xml`));
      expect(error, id).toMatchObject({ line: expect.any(Number), col: expect.any(Number) });
    }
  });
});
