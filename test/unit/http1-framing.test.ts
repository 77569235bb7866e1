/**
 * The HTTP/1.1 client's readers of an answer (runtime/model/http1.ts): the head, and a chunked body cut at every
 * byte, as a socket may hand them over.
 */
import { describe, expect, it } from "vitest";
import { ChunkReader, MAX_HEAD_BYTES, parseHead } from "../../runtime/model/http1.js";

describe("parseHead", () => {
  it("reads the status, its text, the headers and whether the connection is kept", () => {
    const head = parseHead(
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Request-Id:  abc \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2",
    );
    if (typeof head === "string") throw new Error(head);
    expect([head.status, head.statusText, head.keepAlive]).toEqual([201, "Created", true]);
    expect(head.headers.get("content-type")).toBe("application/json");
    expect(head.headers.get("x-request-id")).toBe("abc");
    expect(head.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
  });

  it("keeps HTTP/1.1 connections unless told to close, and HTTP/1.0 ones only when told to keep them", () => {
    const kept = (text: string) => {
      const head = parseHead(text);
      if (typeof head === "string") throw new Error(head);
      return head.keepAlive;
    };
    expect(kept("HTTP/1.1 200 OK\r\nConnection: close")).toBe(false);
    expect(kept("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close")).toBe(false);
    expect(kept("HTTP/1.0 200 OK")).toBe(false);
    expect(kept("HTTP/1.0 200 OK\r\nConnection: keep-alive")).toBe(true);
    expect(kept("HTTP/1.1 200")).toBe(true);
  });

  it("names what it cannot read", () => {
    expect(parseHead("HTTP/2 200 OK")).toMatch(/not an HTTP\/1.x status line/);
    expect(parseHead("HTTP/1.1 20 OK")).toMatch(/not an HTTP\/1.x status line/);
    expect(parseHead("HTTP/1.1 200 OK\r\nX-A: 1\r\n continued")).toBe("a folded header line");
    expect(parseHead("HTTP/1.1 200 OK\r\nno colon here")).toMatch(/not a header line/);
    expect(parseHead("HTTP/1.1 200 OK\r\nBad Name: 1")).toMatch(/not a header line/);
    expect(parseHead("HTTP/1.1 200 OK\r\nX-A: a\0b")).toMatch(/control character in header X-A/);
  });
});

describe("ChunkReader", () => {
  const body = "4;ext=1\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n";

  it("reads a chunked body cut at every byte, extensions and trailers dropped", () => {
    for (let cut = 0; cut <= body.length; cut++) {
      const reader = new ChunkReader();
      const parts: Buffer[] = [];
      const first = reader.read(Buffer.from(body.slice(0, cut)), (p) => parts.push(Buffer.from(p)));
      expect(first).toMatchObject({ done: cut === body.length });
      if (cut < body.length)
        expect(reader.read(Buffer.from(body.slice(cut)), (p) => parts.push(Buffer.from(p)))).toEqual({ done: true, extra: 0 });
      expect(Buffer.concat(parts).toString()).toBe("Wikipedia in \r\n\r\nchunks.");
    }
  });

  it("reads a body handed over one byte at a time, and counts what follows its end", () => {
    const reader = new ChunkReader();
    const parts: Buffer[] = [];
    let last: unknown;
    for (const byte of Buffer.from(`${body}HTTP`)) last = reader.read(Buffer.from([byte]), (p) => parts.push(Buffer.from(p)));
    expect(last).toEqual({ done: true, extra: 1 });
    expect(Buffer.concat(parts).toString()).toBe("Wikipedia in \r\n\r\nchunks.");
  });

  it("names a malformed size line, a chunk without its CRLF and a line that never ends", () => {
    expect(new ChunkReader().read(Buffer.from("zz\r\n"), () => undefined)).toMatch(/chunk size line/);
    expect(new ChunkReader().read(Buffer.from("-1\r\n"), () => undefined)).toMatch(/chunk size line/);
    expect(new ChunkReader().read(Buffer.from("2\r\nabXY"), () => undefined)).toBe("a chunk not followed by CRLF");
    expect(new ChunkReader().read(Buffer.alloc(MAX_HEAD_BYTES + 1, "a"), () => undefined)).toMatch(/over 65536 bytes/);
  });
});
