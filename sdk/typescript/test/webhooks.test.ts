// The webhook verifier against fixed vectors from the Rust signer's tests
// (test/fixtures/webhook-vectors.json says where each came from).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseWebhookKey, verifyWebhook, verifyWebhookRequest, WebhookVerificationError } from "../src/index.js";

interface Vector {
  name: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  keys: string[];
  now: number;
  expect: "ok" | "no_valid_signature" | "expired" | "bad_timestamp";
}
const fixture = JSON.parse(readFileSync(new URL("../../test/fixtures/webhook-vectors.json", import.meta.url), "utf8")) as {
  toleranceSeconds: number;
  vectors: Vector[];
};

for (const v of fixture.vectors) {
  test(`webhook vector: ${v.name}`, () => {
    const run = () => verifyWebhook({ ...v, toleranceSeconds: fixture.toleranceSeconds });
    if (v.expect === "ok") {
      run();
    } else {
      assert.throws(run, (e: unknown) => {
        assert.ok(e instanceof WebhookVerificationError);
        assert.equal(e._tag, "WebhookVerificationError");
        assert.equal(e.reason, v.expect);
        return true;
      });
    }
  });
}

test("the fixture covers every outcome", () => {
  const outcomes = new Set(fixture.vectors.map((v) => v.expect));
  assert.deepEqual([...outcomes].sort(), ["bad_timestamp", "expired", "no_valid_signature", "ok"]);
});

test("a request's headers are read in any case; a missing one is named", () => {
  const v = fixture.vectors[0];
  const headers = { "Webhook-Id": v.id, "WEBHOOK-TIMESTAMP": v.timestamp, "webhook-signature": v.signature };
  verifyWebhookRequest(headers, Buffer.from(v.body), v.keys, { now: v.now });
  verifyWebhookRequest(new Headers(headers), v.body, v.keys, { now: v.now });
  assert.throws(
    () => verifyWebhookRequest({ "webhook-id": v.id, "webhook-signature": v.signature }, v.body, v.keys, { now: v.now }),
    (e: unknown) => e instanceof WebhookVerificationError && e.reason === "missing_header" && /webhook-timestamp/.test(e.message),
  );
});

test("keys are checked: prefix, base64, length", () => {
  for (const bad of ["whpk_AAAA", "whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "whsec_", "whpk_!!"]) {
    assert.throws(() => parseWebhookKey(bad), (e: unknown) => e instanceof WebhookVerificationError && e.reason === "bad_key", bad);
  }
});
