/**
 * How wide a line of chart text is drawn, without a browser: the layout reserves this much room for every state name
 * and transition label, so the page's text must never be wider than the estimate.
 */

/**
 * Advance widths of the printable ASCII characters (space to `~`) in hundredths of an em, as DejaVu Sans draws them
 * (measured in headless Chromium, where `system-ui` resolves to DejaVu Sans). DejaVu Sans is wider than the other
 * usual `system-ui` fonts (Segoe UI, San Francisco, Cantarell, Roboto), so text drawn in any of them fits too.
 */
const ADVANCE = [
  32, 40, 46, 84, 64, 95, 78, 27, 39, 39, 50, 84, 32, 36, 32, 34, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 34, 34, 84, 84, 84, 53, 100, 68,
  69, 70, 77, 63, 58, 77, 75, 29, 29, 66, 56, 86, 75, 79, 60, 79, 69, 63, 61, 73, 68, 99, 69, 61, 69, 39, 34, 39, 84, 50, 50, 61, 63, 55,
  63, 62, 35, 63, 63, 28, 28, 58, 28, 97, 63, 61, 63, 63, 41, 52, 39, 63, 59, 82, 59, 59, 52, 64, 34, 64, 84,
];

/** A character outside printable ASCII is counted as one em, the width of the widest glyphs. */
const OTHER = 100;

/**
 * The width in pixels of `text` drawn at `fontSize` pixels, rounded up.
 *
 * @example textWidth("running", 12) // 46
 */
export function textWidth(text: string, fontSize: number): number {
  let hundredths = 0;
  for (const char of text) hundredths += ADVANCE[(char.codePointAt(0) ?? 0) - 32] ?? OTHER;
  return Math.ceil((hundredths * fontSize) / 100);
}
