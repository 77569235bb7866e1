/**
 * The digest that names a record in the turns bucket (`<task>.t<digest>`, `.s`, `.k`, `.i`, `.node.`): the first 40
 * hex digits of the SHA-256 of its parts' JSON. Every writer and reader of a record computes its key here, so a
 * record written by one release is found by the next.
 */
import * as crypto from "node:crypto";

/** Node's one-shot hash (Node ≥ 20.12): no Hash object per digest. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: "hex") => string }).hash;

const sha256Hex: (text: string) => string = oneShot
  ? (text) => oneShot("sha256", text, "hex")
  : (text) => crypto.createHash("sha256").update(text).digest("hex");

/** The digest of `parts`, as record keys use it. */
export function recordDigest(parts: readonly unknown[]): string {
  return sha256Hex(JSON.stringify(parts)).slice(0, 40);
}
