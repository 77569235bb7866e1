/**
 * The content codings a model's answer may come in, decoded as `fetch` decodes them (gzip, deflate, br), for the model
 * client's own HTTP clients (./http1.ts, ./http-fetch.ts).
 */
import { promisify } from "node:util";
import zlib from "node:zlib";

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const brotli = promisify(zlib.brotliDecompress);

/** What decodes a whole body in `encoding` (gzip, deflate or br), or undefined when it needs no decoding. */
export function decoderOf(encoding: string | null): ((bytes: Buffer) => Promise<Buffer>) | undefined {
  switch (encoding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return gunzip;
    case "deflate":
      return inflate;
    case "br":
      return brotli;
    default:
      return undefined;
  }
}

/** A stream that decodes a body in `encoding` as it comes, or undefined when it needs no decoding. */
export function streamDecoderOf(encoding: string | null): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | undefined {
  switch (encoding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip();
    case "deflate":
      return zlib.createInflate();
    case "br":
      return zlib.createBrotliDecompress();
    default:
      return undefined;
  }
}
