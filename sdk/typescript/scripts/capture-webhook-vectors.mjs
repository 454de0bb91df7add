#!/usr/bin/env node
// Made the hub-signed vectors of test/fixtures/webhook-vectors.json, once:
// imports two known Ed25519 secrets with `switchboard keys rotate
// --secret-file` (the Rust tests' whsk_ seed 0..31, then seed 32..63, so
// both sign during the overlap), has the hub send POST /api/v1/webhooks/test
// to an HTTPS receiver on 127.0.0.1, and writes what arrived as fixed
// vectors. Rerun only to replace them (after `npm run build`):
//   SWITCHBOARD_BIN=../../target/debug/switchboard node scripts/capture-webhook-vectors.mjs
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ADMIN_TOKEN, TestHub } from "../dist/test/support/hub.js";
import { egressEnv, makeCertificates, rotateKey, WebhookReceiver } from "../dist/test/support/webhooks.js";

const fixturePath = fileURLToPath(new URL("../test/fixtures/webhook-vectors.json", import.meta.url));
const seed = (from) => `whsk_${Buffer.from(Array.from({ length: 32 }, (_, i) => from + i)).toString("base64")}`;

const dir = mkdtempSync(join(tmpdir(), "capture-"));
const certs = makeCertificates(dir);
const receiver = await WebhookReceiver.start(certs);
const dataDir = join(dir, "data");
for (const [name, from] of [["old", 0], ["new", 32]]) {
  writeFileSync(join(dir, name), seed(from));
  rotateKey(dataDir, join(dir, name));
}
const hub = await TestHub.start({ dataDir, env: egressEnv(receiver.port, certs) });
try {
  const sent = await hub.request("POST", "/api/v1/webhooks/test", { url: `https://localhost:${receiver.port}/hook` }, ADMIN_TOKEN);
  if (sent.body.outcome !== "ok") throw new Error(JSON.stringify(sent.body));
  const { value: d } = await receiver.deliveries.next();
  const keys = (await hub.request("GET", "/api/v1/webhooks/keys")).body.keys;
  const active = keys.find((k) => k.state === "active").publicKey;
  const secondary = keys.find((k) => k.state === "secondary").publicKey;
  const base = {
    id: d.headers["webhook-id"],
    timestamp: d.headers["webhook-timestamp"],
    signature: d.headers["webhook-signature"],
    body: d.body.toString("utf8"),
    now: Number(d.headers["webhook-timestamp"]) + 10,
    origin: "hub",
  };
  const vectors = [
    { ...base, name: "hub-signed during a rotation, both published keys", keys: [active, secondary], expect: "ok" },
    { ...base, name: "hub-signed during a rotation, the active key alone", keys: [active], expect: "ok" },
    { ...base, name: "hub-signed during a rotation, the retiring key alone", keys: [secondary], expect: "ok" },
    { ...base, name: "hub-signed, the first listed signature alone", signature: base.signature.split(" ")[0], keys: [active, secondary], expect: "ok" },
    { ...base, name: "hub-signed, body tampered", body: base.body.replace("switchboard", "switchb0ard"), keys: [active, secondary], expect: "no_valid_signature" },
    { ...base, name: "hub-signed, an HMAC secret instead of the keys", keys: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], expect: "no_valid_signature" },
    { ...base, name: "hub-signed, read an hour later", now: base.now + 3600, keys: [active, secondary], expect: "expired" },
  ];
  const fixture = JSON.parse(readFileSync(fixturePath, "utf8"));
  fixture.vectors = [...fixture.vectors.filter((v) => v.origin !== "hub"), ...vectors];
  writeFileSync(fixturePath, `${JSON.stringify(fixture, null, 2)}\n`);
  console.log(`wrote ${vectors.length} hub-signed vectors to ${fixturePath}`);
} finally {
  await hub.stop();
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
