import { parseTemplate } from "./dist/actors/template/parse.js";
const t = (label, s) => { const a = performance.now(); let r; try { r = parseTemplate(s); r = r.ok ? "ok" : JSON.stringify(r.error); } catch (e) { r = "THROW " + e.message.slice(0, 100); } console.log(label, r.slice(0, 200), (performance.now() - a).toFixed(0) + "ms"); };
const lol = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<task><description>&lol3;</description></task>`;
t("lol", lol);
for (const d of [150, 3000, 100000]) t("deep" + d, "<task><description>x</description>" + "<a>".repeat(d) + "</a>".repeat(d) + "</task>");
t("deep-unclosed", "<a>".repeat(100000));
t("1MB desc", "<task><description>" + "a".repeat(1000000) + "</description></task>");
t("attrs", "<task " + Array.from({length: 20000}, (_, i) => `a${i}="x"`).join(" ") + "><description>x</description></task>");
t("comments", "<task><description>x</description></task>" + "<!--".repeat(200000));
t("entity-in-comment", "<task><description>x</description></task><!-- <!DOCTYPE x> -->");
