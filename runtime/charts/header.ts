/**
 * Where a compound state's name goes: in the band ELK leaves free above its children, at the left unless an edge
 * runs through there (an edge entering the state or one of its children through its top, or one declared on the
 * state itself going to a child) or a label lies there; then at the first place to the right that is clear.
 */
import { crosses, overlaps, type Box, type Point } from "./geometry.js";

/** Room between a name and the left border of its state. */
const INSET = 10;
/** How far each try moves right. */
const STEP = 4;
/** Room kept clear around a name. */
const CLEAR = 2;

/**
 * The box of a compound state's name (`width` × `height`), centred in the `band` pixels at the top of `state`, at
 * the leftmost place no line of `lines` runs through and no box of `labels` overlaps; at the left when there is none.
 */
export function headerBox(
  state: Box,
  band: number,
  width: number,
  height: number,
  lines: readonly (readonly Point[])[],
  labels: readonly Box[],
): Box {
  const y = state.y + (band - height) / 2;
  const clear = (x: number): boolean => {
    const around = { x: x - CLEAR, y: y - CLEAR, width: width + 2 * CLEAR, height: height + 2 * CLEAR };
    return (
      !labels.some((label) => overlaps(label, around)) &&
      !lines.some((line) => line.slice(1).some((b, i) => crosses(line[i] as Point, b, around)))
    );
  };
  for (let x = state.x + INSET; x + width <= state.x + state.width - INSET; x += STEP) if (clear(x)) return { x, y, width, height };
  return { x: state.x + INSET, y, width, height };
}
