// A webhook the hub itself signs and sends (POST /api/v1/webhooks/test)
// during a key rotation verifies with the keys it publishes
// (GET /api/v1/webhooks/keys), with either key alone, and fails when the
// body or the key is not the hub's.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { verifyWebhookRequest, WebhookVerificationError } from "../src/index.js";
import { ADMIN_TOKEN, TestHub } from "./support/hub.js";
import { within } from "./support/wait.js";
import { egressEnv, makeCertificates, migrate, rotateKey, WebhookReceiver } from "./support/webhooks.js";

test("a webhook signed by the hub during a rotation verifies with its published keys", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdk-webhook-"));
  const certs = makeCertificates(dir);
  const receiver = await WebhookReceiver.start(certs);
  const dataDir = join(dir, "data");
  migrate(dataDir); // operator commands never create the database
  rotateKey(dataDir);
  rotateKey(dataDir); // the first key turns secondary: both sign for the overlap
  const hub = await TestHub.start({ dataDir, env: egressEnv(receiver.port, certs) });
  try {
    const sent = await hub.request("POST", "/api/v1/webhooks/test", { url: `https://localhost:${receiver.port}/hook` }, ADMIN_TOKEN);
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.equal(sent.body.outcome, "ok", JSON.stringify(sent.body));
    const delivery = (await within(10_000, "the webhook", receiver.deliveries.next())).value;
    assert.equal(delivery.headers["webhook-id"], sent.body.webhookId);
    assert.equal(String(delivery.headers["webhook-signature"]).split(" ").length, 2, "one signature per signing key");

    const published = await hub.request("GET", "/api/v1/webhooks/keys");
    const keys: string[] = published.body.keys.map((k: { publicKey: string }) => k.publicKey);
    assert.equal(keys.length, 2);
    verifyWebhookRequest(delivery.headers, delivery.body, keys);
    verifyWebhookRequest(delivery.headers, delivery.body, [keys[0]]);
    verifyWebhookRequest(delivery.headers, delivery.body, [keys[1]]);

    const tampered = Buffer.from(delivery.body.toString("utf8").replace("switchboard", "switchb0ard"));
    assert.throws(() => verifyWebhookRequest(delivery.headers, tampered, keys),
      (e: unknown) => e instanceof WebhookVerificationError && e.reason === "no_valid_signature");
    const stranger = "whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="; // the Rust tests' key, not this hub's
    assert.ok(!keys.includes(stranger));
    assert.throws(() => verifyWebhookRequest(delivery.headers, delivery.body, [stranger]),
      (e: unknown) => e instanceof WebhookVerificationError && e.reason === "no_valid_signature");
  } finally {
    await hub.stop();
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
