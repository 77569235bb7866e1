/**
 * Hostile XML: entity declarations are refused (never expanded) and nesting deeper than MAX_TEMPLATE_DEPTH is
 * refused by a linear pre-scan, with line and column, before fast-xml-parser walks it. The 100,000-deep cases
 * finish at all (no stack overflow) because the parser never sees them.
 */
import { describe, expect, it } from "vitest";
import { parseTemplate } from "../../../machines/language/parse.js";
import { MAX_TEMPLATE_DEPTH, readXml } from "../../../machines/language/xml.js";
import type { TemplateError } from "../../../machines/language/ast.js";

function failure(xml: string): TemplateError {
  const outcome = parseTemplate(xml);
  if (outcome.ok) throw new Error("expected INVALID_TEMPLATE, got ok");
  expect(outcome.error.code).toBe("INVALID_TEMPLATE");
  return outcome.error;
}

const nested = (depth: number, name = "a") => `${`<${name}>`.repeat(depth)}${`</${name}>`.repeat(depth)}`;

const BILLION_LAUGHS = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<task><description>&lol9;</description></task>`;

describe("template XML: entity declarations", () => {
  it("refuses a billion-laughs document at its DOCTYPE, without expanding anything", () => {
    const error = failure(BILLION_LAUGHS);
    expect(error.message).toContain("<!DOCTYPE>");
    expect(error.message).toContain("never expanded");
    expect(error).toMatchObject({ line: 2, col: 1 });
  });

  it("refuses external entities and a bare ENTITY declaration, with their location", () => {
    expect(failure('<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<task><description>&x;</description></task>')).toMatchObject({
      line: 1,
      col: 1,
    });
    expect(failure('<task>\n  <!ENTITY x "y">\n<description>x</description></task>')).toMatchObject({ line: 2, col: 3 });
  });

  it("leaves declarations inside comments and CDATA alone (they are text)", () => {
    expect(parseTemplate("<task><description><![CDATA[<!DOCTYPE x [<!ENTITY a 'b'>]>]]></description></task>").ok).toBe(true);
    expect(parseTemplate("<!-- <!DOCTYPE x> --><task><description>x</description></task>").ok).toBe(true);
  });

  it("keeps undeclared entity references as written, and decodes only the predefined and numeric ones", () => {
    const outcome = parseTemplate("<task><description>&lol9; &amp; &#65;</description></task>");
    expect(outcome.ok && outcome.document.entry?.kind === "task" ? outcome.document.entry.description : undefined).toBe("&lol9; & A");
  });
});

describe("template XML: nesting depth", () => {
  it(`accepts ${MAX_TEMPLATE_DEPTH} levels and refuses one more at the start tag that goes too deep`, () => {
    expect(readXml(nested(MAX_TEMPLATE_DEPTH)).roots).toHaveLength(1);
    const error = failure(`<task>\n${nested(MAX_TEMPLATE_DEPTH)}</task>`);
    expect(error.message).toContain(`more than ${MAX_TEMPLATE_DEPTH} levels`);
    expect(error).toMatchObject({ line: 2, col: (MAX_TEMPLATE_DEPTH - 1) * 3 + 1 });
  });

  it("refuses 3,000 and 100,000 levels without overflowing the stack", () => {
    for (const depth of [3000, 100_000]) {
      expect(failure(nested(depth))).toMatchObject({ line: 1, col: MAX_TEMPLATE_DEPTH * 3 + 1 });
      expect(failure(`<a>`.repeat(depth)).message).toContain("too deeply");
      expect(failure(`<a x="1">`.repeat(depth)).message).toContain("too deeply");
    }
  });

  it("counts only open elements: siblings, self-closing tags, comments, CDATA and quoted '>' do not nest", () => {
    const siblings = `<a>${"<b/>".repeat(10_000)}${"<c></c>".repeat(10_000)}</a>`;
    expect(readXml(siblings).roots).toHaveLength(1);
    const quoted = `${'<a x="> <b>">'.repeat(MAX_TEMPLATE_DEPTH)}${"</a>".repeat(MAX_TEMPLATE_DEPTH)}`;
    expect(readXml(quoted).roots).toHaveLength(1);
    const hidden = `<a><!-- ${"<b>".repeat(1000)} --><![CDATA[${"<b>".repeat(1000)}]]></a>`;
    expect(readXml(hidden).roots).toHaveLength(1);
  });

  it("still reports other malformed input as not well-formed", () => {
    expect(failure("<task><description>x</task>").message).toContain("not well-formed");
    expect(failure("<task <description>x</description></task>").message).toContain("not well-formed");
  });
});
