import { parseTemplate } from "./dist/actors/template/parse.js";
import { XMLValidator, XMLParser } from "fast-xml-parser";
const t = (label, s, f = parseTemplate) => { const a = performance.now(); let r = f(s); console.log(label, s.length, typeof r === "object" && r && "ok" in r ? r.ok || r.error.message : "", (performance.now() - a).toFixed(0) + "ms"); };
for (const n of [250000, 500000, 1000000]) t("desc", "<task><description>" + "a".repeat(n) + "</description></task>");
for (const n of [250000, 500000, 1000000]) t("validate", "<task><description>" + "a".repeat(n) + "</description></task>", (s) => XMLValidator.validate(s));
for (const n of [5000, 10000, 20000]) t("attrs", "<task " + Array.from({length: n}, (_, i) => `a${i}="x"`).join(" ") + "><description>x</description></task>");
for (const n of [5000, 10000, 20000]) t("attrs-validate", "<task " + Array.from({length: n}, (_, i) => `a${i}="x"`).join(" ") + "><description>x</description></task>", (s) => XMLValidator.validate(s));
