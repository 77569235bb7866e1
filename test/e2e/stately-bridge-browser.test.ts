/**
 * The Stately bridge page in headless Debian Chromium, framing a stand-in for the Stately inspector served on another
 * loopback port (the real one needs the internet): under the page's Content-Security-Policy, its script connects to
 * the bridge's WebSocket and hands the stand-in every inspection event, those sent before the stand-in said it was
 * connected and those after, however late the page's own script arrives.
 */
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InspectMessage } from "../../protocol/inspect.js";
import { startStatelyBridge } from "../../runtime/inspect/stately.js";

/** Debian's Chromium, as in inspector-browser.test.ts. */
const CHROMIUM = "/usr/bin/chromium";
/** The stand-in: tells its parent it is connected, and keeps what it is sent in `window.received`. */
const STAND_IN = `<!doctype html><title>stand-in</title><script>
window.received = [];
window.addEventListener("message", (e) => window.received.push({ origin: e.origin, data: e.data }));
parent.postMessage({ type: "@statelyai.connected" }, "*");
</script>`;

let browser: Browser;
let standIn: Server;
let standInUrl: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install -y chromium; .ci/run does it)`);
  standIn = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(STAND_IN);
  });
  await new Promise<void>((resolve) => standIn.listen(0, "127.0.0.1", resolve));
  standInUrl = `http://localhost:${(standIn.address() as AddressInfo).port}/inspect`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (standIn ? standIn.close(() => resolve()) : resolve()));
});

const actor = (n: number): InspectMessage => ({
  type: "inspect.actor",
  process: "h:1",
  role: "director",
  taskId: "t-1",
  actorId: `h:1/1/x:${n}`,
  rootId: `h:1/1/x:${n}`,
  at: Date.now(),
  machine: "task",
  isMachine: true,
  snapshot: { status: "active", value: "queued" },
});

describe("the Stately bridge page in a browser", () => {
  it("passes the bridge's events to the framed inspector under its CSP", async () => {
    const bridge = await startStatelyBridge({ port: 0, url: standInUrl });
    const page = await browser.newPage();
    try {
      await page.addInitScript({
        content: `window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));`,
      });
      // The page's script arrives late, as on a slow link: a frame loaded with the page would have said it is connected
      // before anything listened (the events then waited for good). The page loads the frame from its script instead.
      await page.route("**/bridge.js", async (route) => {
        const framed = (await page.evaluate(`document.getElementById("inspector")?.getAttribute("src") ?? ""`)) as string;
        if (framed !== "") {
          const loaded =
            page.frames().find((f) => f.url() === standInUrl) ?? (await page.waitForEvent("framenavigated", (f) => f.url() === standInUrl));
          await loaded.waitForFunction("window.received !== undefined");
        }
        await route.continue();
      });
      bridge.forward(actor(0));
      const response = await page.goto(bridge.pageUrl);
      expect(response?.headers()["content-security-policy"]).toContain(`frame-src ${new URL(standInUrl).origin};`);
      const frame = page.frameLocator("#inspector");
      await frame.locator("title").waitFor({ state: "attached" });
      const inner = page.frames().find((f) => f.url() === standInUrl);
      expect(inner).toBeDefined();
      const received = async () =>
        (await inner?.evaluate("window.received")) as Array<{ origin: string; data: { type?: string; sessionId?: string } }>;
      await inner?.waitForFunction("window.received.length >= 1");
      bridge.forward(actor(1));
      await inner?.waitForFunction("window.received.length >= 2");
      const events = await received();
      expect(events.map((e) => [e.data.type, e.data.sessionId])).toEqual([
        ["@xstate.actor", "h:1/1/x:0"],
        ["@xstate.actor", "h:1/1/x:1"],
      ]);
      expect(new Set(events.map((e) => e.origin))).toEqual(new Set([new URL(bridge.pageUrl).origin]));
      expect(await page.evaluate("window.__violations")).toEqual([]);
    } finally {
      await page.close();
      await bridge.stop();
    }
  });
});
