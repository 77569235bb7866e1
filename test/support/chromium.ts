/** Headless Debian Chromium for the browser tests, driven by playwright-core (no browser is downloaded). */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium; `.ci/run` installs it (`apt-get install chromium`). */
export const CHROMIUM = "/usr/bin/chromium";

/** Launches Chromium headless, with the flags of every browser test, or fails saying how to install it. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install -y chromium; .ci/run does it)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}
