/**
 * The build step after `tsc` (`npm run build`): `node dist/runtime/charts/prebuild.js` lays out every machine's chart
 * into dist/, so the inspector does not lay them out when it starts (see `cache.ts`).
 */
import { PREBUILT_CHARTS, writePrebuiltCharts } from "./cache.js";

await writePrebuiltCharts(PREBUILT_CHARTS);
