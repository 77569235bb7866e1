/** The plane a chart is drawn on: points, boxes, and whether a line runs through a box. */

/** A point of a chart, in pixels from its top left corner. */
export interface Point {
  x: number;
  y: number;
}

/** A rectangle of a chart. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Whether the segment a–b runs through the inside of `box` (Liang–Barsky clipping); touching its border does not count. */
export function crosses(a: Point, b: Point, box: Box): boolean {
  if (box.width <= 0 || box.height <= 0) return false;
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  let t0 = 0;
  let t1 = 1;
  for (const [p, q] of [
    [-dx, a.x - box.x],
    [dx, box.x + box.width - a.x],
    [-dy, a.y - box.y],
    [dy, box.y + box.height - a.y],
  ] as const) {
    if (p === 0) {
      if (q <= 0) return false;
      continue;
    }
    const t = q / p;
    if (p < 0) t0 = Math.max(t0, t);
    else t1 = Math.min(t1, t);
    if (t0 >= t1) return false;
  }
  return true;
}

/** Whether two boxes share some of their inside. */
export function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}
