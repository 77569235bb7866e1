/**
 * A subject of one bench run made generic, so that counts of many tasks add up by kind: the run's subject root (and its
 * upper-case form in stream and bucket names) becomes `R`, task ids `<id>`, record hashes `<hash>`, reply inboxes
 * `_INBOX.<reply>`, intake acknowledgements `$JS.ACK.<intake>` and a trailing NUID `<nuid>`. Shared by records-cost.mjs
 * `--tap` and ./count-writes.cjs (preloaded into `dirigent up`, hence CommonJS).
 */
"use strict";

exports.genericSubject = function genericSubject(subject, root) {
  return (root ? subject.replaceAll(root, "R").replaceAll(root.toUpperCase(), "R") : subject)
    .replace(/b-[0-9a-f-]{36}/g, "<id>")
    .replace(/\.t[0-9a-f]{40}/g, ".t<hash>")
    .replace(/\.node\.[0-9a-f]{40}/g, ".node.<hash>")
    .replace(/_INBOX\.[^ ]*/g, "_INBOX.<reply>")
    .replace(/^\$JS\.ACK\..*/, "$JS.ACK.<intake>")
    .replace(/\.[A-Za-z0-9]{22}$/g, ".<nuid>");
};
