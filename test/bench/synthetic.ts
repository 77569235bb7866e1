/** Synthetic file-index entries and task descriptions for the Memory benchmark (deterministic). */
import type { IndexEntry } from "../../machines/memory/memory.js";

const DEV =
  "parse template xml task handler memory index match rank bus nats stream queue worker config load save user account payment invoice order cart search cache token session auth login logout render view model route api client server test fixture mock schema event message retry backoff limit budget report export import upload download image video audio email notify schedule cron job batch sync async lock mutex graph tree node edge path file folder dir walk ignore glob pattern filter sort merge split diff patch commit branch tag release build deploy docker kube helm metric trace log error panic recover".split(
    " ",
  );
const SYLLABLES = "ka lo mi ne ru sa te vo zi pa da fe gu hi jo ku la me no pi qu re si to".split(" ");
const LANGS: [string, string][] = [
  ["ts", "TypeScript"],
  ["py", "Python"],
  ["md", "Markdown"],
  ["go", "Go"],
  ["rs", "Rust"],
  ["js", "JavaScript"],
];

/** A small deterministic PRNG (mulberry32). */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function vocabulary(rand: () => number, size: number): string[] {
  const words = new Set(DEV);
  while (words.size < size) {
    const n = 2 + Math.floor(rand() * 3);
    words.add(Array.from({ length: n }, () => SYLLABLES[Math.floor(rand() * SYLLABLES.length)]).join(""));
  }
  return [...words];
}

/**
 * `count` entries over a vocabulary of ~5,000 words, shaped like the indexer's metadata, each with identifiers (10 to
 * 60 camelCase names, up to 1,000 characters, as the indexer writes for a source file). The identifiers are drawn
 * from a PRNG of their own, so the paths and metadata are those of the entries before identifiers existed.
 */
export function syntheticIndex(count: number, seed = 1): { entries: IndexEntry[]; words: string[] } {
  const rand = random(seed);
  const other = random(seed + 1000);
  const words = vocabulary(rand, 5000);
  const pick = () => words[Math.floor(Math.pow(rand(), 2) * words.length)] ?? "x";
  const camel = (a: string, b: string) => a + b.charAt(0).toUpperCase() + b.slice(1);
  const entries: IndexEntry[] = [];
  for (let i = 0; i < count; i++) {
    const [ext, language] = LANGS[i % LANGS.length] ?? ["ts", "TypeScript"];
    const path = `/repo/pkg-${i % 200}/${pick()}/${pick()}-${pick()}-${i}.${ext}`;
    const description = Array.from({ length: 6 + Math.floor(rand() * 6) }, pick).join(" ");
    const names = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => camel(pick(), pick())).join(", ");
    const pickOther = () => words[Math.floor(Math.pow(other(), 2) * words.length)] ?? "x";
    const identifiers = Array.from({ length: 10 + Math.floor(other() * 51) }, () => camel(pickOther(), pickOther()))
      .join(" ")
      .slice(0, 1000);
    entries.push({
      path,
      metadata: `language: ${language}; size: ${(rand() * 40).toFixed(1)} KB; ${description}; exports: ${names}`,
      identifiers,
    });
  }
  return { entries, words };
}

/** Task descriptions of 6–14 words from the same vocabulary. */
export function syntheticQueries(words: readonly string[], count: number, seed = 2): string[] {
  const rand = random(seed);
  const filler = ["the", "and", "of", "a", "to", "fix", "add", "update", "in"];
  return Array.from({ length: count }, () =>
    Array.from({ length: 6 + Math.floor(rand() * 9) }, () =>
      rand() < 0.3 ? filler[Math.floor(rand() * filler.length)] : words[Math.floor(Math.pow(rand(), 2) * words.length)],
    ).join(" "),
  );
}
