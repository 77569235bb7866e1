/**
 * Hostile message bodies for fuzzing the protocol boundary: random bytes, truncated JSON, prototype keys, deep
 * nesting, XML bombs, huge bodies, bad ids, wrong types and huge numbers, all from a seeded PRNG so a failure can be
 * reproduced from the printed seed.
 */

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence. */
export { random as prng } from "../bench/synthetic.js";

/** The seed of this run: `HOSTILE_SEED` when set (to reproduce a failure), otherwise a fresh one. */
export function hostileSeed(): number {
  const fromEnv = Number(process.env.HOSTILE_SEED);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : 1 + Math.floor(Math.random() * 2 ** 31);
}

/** One hostile message: what kind it is (for failure messages), its body and, sometimes, headers. */
export interface HostileCase {
  kind: string;
  body: Uint8Array;
  headers?: Record<string, string>;
}

const enc = new TextEncoder();
const bytesOf = (text: string): Uint8Array => enc.encode(text);

/** Task and goal ids that must never be taken: wildcards, dots, spaces, control characters, too long, not ASCII. */
export const HOSTILE_IDS: readonly string[] = [
  "*",
  ">",
  "a.b",
  "a..b",
  ".",
  "a b",
  " ",
  "tab\there",
  "nl\nx",
  "nul\u0000x",
  "esc\u001b[31m",
  "del\u007f",
  "x".repeat(65),
  "x".repeat(5000),
  "",
  "é",
  "😀",
  "$JS.API.STREAM.LIST",
  "_INBOX.x",
  "../../etc/passwd",
  "__proto__",
  "constructor",
];

/** Keys that pollute a prototype when copied by assignment into a plain object. */
export const PROTO_KEYS: readonly string[] = ["__proto__", "constructor", "prototype"];

/** A billion-laughs entity bomb (ten levels of ten references). */
export function entityBomb(): string {
  const levels = ['<!ENTITY lol0 "lol">'];
  for (let i = 1; i <= 9; i++) levels.push(`<!ENTITY lol${i} "${`&lol${i - 1};`.repeat(10)}">`);
  return `<?xml version="1.0"?><!DOCTYPE task [${levels.join("")}]><task><description>&lol9;</description></task>`;
}

/** An external-entity reference (XXE). */
export const EXTERNAL_ENTITY = `<?xml version="1.0"?><!DOCTYPE task [<!ENTITY x SYSTEM "file:///etc/passwd">]><task><description>&x;</description></task>`;

/** XML nested `depth` levels deep, inside a task that is otherwise valid. */
export function deepXml(depth: number, element = "a"): string {
  return `<task><description>x</description>${`<${element}>`.repeat(depth)}${`</${element}>`.repeat(depth)}</task>`;
}

/** Tasks nested `depth` levels deep. */
export function deepTasks(depth: number): string {
  return `${"<task type='sequential'>".repeat(depth)}<task><description>x</description></task>${"</task>".repeat(depth)}`;
}

/** JSON text nested `depth` levels deep (arrays or objects). */
export function deepJson(depth: number, kind: "array" | "object" = "array"): string {
  return kind === "array" ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

/** JSON text of `value` with the property `key` set to the raw JSON text `raw` (which JSON.stringify cannot make). */
export function withRaw(value: Record<string, unknown>, key: string, raw: string): string {
  const marker = "\u0000RAW\u0000";
  return JSON.stringify({ ...value, [key]: marker }).replace(JSON.stringify(marker), raw);
}

/** Options of {@link hostileCases}. */
export interface HostileOptions {
  /** How many bodies of about 900 KB to make (they are slow to send and to check). */
  huge?: number;
}

/**
 * `count` hostile cases built around `valid`, a well-formed body of the subject (mutated field by field), in a
 * deterministic order for the given PRNG.
 */
export function hostileCases(
  rand: () => number,
  valid: Record<string, unknown>,
  count: number,
  options: HostileOptions = {},
): HostileCase[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const int = (n: number) => Math.floor(rand() * n);
  const junk = (n: number) => Array.from({ length: n }, () => String.fromCharCode(32 + int(95))).join("");
  const keys = Object.keys(valid);
  const key = () => (keys.length > 0 && rand() < 0.8 ? pick(keys) : pick(["inputs", "data", "extra", junk(6)]));
  const objectKey = () =>
    pick(keys.filter((k) => typeof valid[k] === "object" && valid[k] !== null && !Array.isArray(valid[k])).concat(["inputs", "data"]));
  const stringKey = () => pick(keys.filter((k) => typeof valid[k] === "string").concat(["xml"]));
  const idKey = () => pick(keys.filter((k) => /id$|owner/i.test(k)).concat(["taskId"]));
  const json = (text: string): HostileCase["body"] => bytesOf(text);
  const validText = JSON.stringify(valid);

  const families: Array<[string, number, () => Uint8Array]> = [
    ["random bytes", 3, () => new Uint8Array(Array.from({ length: int(257) }, () => int(256)))],
    ["junk text", 2, () => bytesOf(junk(1 + int(120)))],
    ["truncated json", 3, () => bytesOf(validText.slice(0, 1 + int(Math.max(1, validText.length - 1))))],
    ["empty body", 1, () => bytesOf(pick(["", " ", "\n", "\t\r\n "]))],
    ["json scalar", 2, () => bytesOf(pick(["null", "42", '"text"', "[]", "true", "1e400", "-0", "{}", "[{}]", '""']))],
    [
      "prototype key at the top",
      4,
      () => {
        const pk = pick(PROTO_KEYS);
        const raw = pk === "constructor" ? '{"prototype":{"polluted":"yes"}}' : '{"polluted":"yes","toString":"x"}';
        return json(`{${JSON.stringify(pk)}:${raw},${validText.slice(1)}`);
      },
    ],
    [
      "prototype key nested",
      4,
      () => {
        const pk = pick(PROTO_KEYS);
        const inner = `{${JSON.stringify(pk)}:{"polluted":"yes","prototype":{"polluted":"yes"}}}`;
        return json(withRaw(valid, objectKey(), rand() < 0.5 ? inner : `{"a":${inner},"b":[${inner}]}`));
      },
    ],
    [
      "deep json",
      2,
      () => {
        const depth = pick([600, 3000, 3000, 20_000]);
        const deep = deepJson(depth, rand() < 0.5 ? "array" : "object");
        return json(rand() < 0.3 ? deep : withRaw(valid, objectKey(), `{"deep":${deep}}`));
      },
    ],
    ["xml entity bomb", 2, () => json(JSON.stringify({ ...valid, [stringKey()]: rand() < 0.7 ? entityBomb() : EXTERNAL_ENTITY }))],
    ["deep xml", 2, () => json(JSON.stringify({ ...valid, [stringKey()]: rand() < 0.5 ? deepXml(3000) : deepTasks(3000) }))],
    ["bad id", 4, () => json(JSON.stringify({ ...valid, [idKey()]: pick(HOSTILE_IDS) }))],
    [
      "wrong type",
      5,
      () =>
        json(
          JSON.stringify({
            ...valid,
            [key()]: pick<unknown>([0, -1, 1.5, true, null, [], [1, "a"], {}, { a: { b: 1 } }, "", "x", junk(20)]),
          }),
        ),
    ],
    [
      "huge number",
      3,
      () =>
        json(
          withRaw(
            valid,
            key(),
            pick([
              "1e308",
              "1e400",
              "-1e400",
              "9".repeat(400),
              "-0",
              "9007199254740993",
              "0.0000000000000000001",
              "123456789012345678901234567890",
            ]),
          ),
        ),
    ],
    ["unknown fields", 2, () => json(JSON.stringify({ ...valid, [junk(1 + int(10))]: junk(10), nested: { [junk(4)]: [junk(3)] } }))],
    [
      "invalid utf-8",
      2,
      () => {
        const text = bytesOf(validText);
        const at = 1 + int(Math.max(1, text.length - 2));
        return new Uint8Array([...text.slice(0, at), pick([0xff, 0xc3, 0xed, 0xf8]), 0x28, ...text.slice(at)]);
      },
    ],
    [
      "control characters",
      2,
      () => json(JSON.stringify({ ...valid, [stringKey()]: `\u0000\u0001\u001b[2J\r\n\u2028\u2029\ud800${junk(5)}` })),
    ],
  ];
  const total = families.reduce((sum, [, weight]) => sum + weight, 0);
  const cases: HostileCase[] = [];
  for (let i = 0; i < count; i++) {
    let roll = rand() * total;
    const family = families.find(([, weight]) => (roll -= weight) < 0) ?? families[0];
    if (family === undefined) break;
    const [kind, , make] = family;
    const hostile: HostileCase = { kind, body: make() };
    // Headers ride on some messages: huge ones, many ones, and hostile keepalive periods.
    if (rand() < 0.06) hostile.headers = hostileHeaders(rand);
    cases.push(hostile);
  }
  for (let i = 0; i < (options.huge ?? 0); i++) {
    const big = "a".repeat(900 * 1024);
    cases.push({
      kind: "900 KB body",
      body: json(rand() < 0.5 ? JSON.stringify({ ...valid, [stringKey()]: big }) : JSON.stringify({ ...valid, [objectKey()]: { big } })),
    });
  }
  return cases;
}

/** Headers no request should need: oversized values, hundreds of them, and keepalive periods that are not sane. */
export function hostileHeaders(rand: () => number): Record<string, string> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const roll = rand();
  if (roll < 0.4) return { "Dirigent-Keepalive": pick(["1e12", "-5", "NaN", "0.0001", "99999999999999999999", "Infinity", "abc", "0"]) };
  if (roll < 0.7) return { "X-Huge": "h".repeat(64 * 1024) };
  const many: Record<string, string> = {};
  for (let i = 0; i < 300; i++) many[`X-H${i}`] = String(i);
  return many;
}
