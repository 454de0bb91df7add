// What it takes for the hub to send a signed webhook to this machine: a
// throwaway CA and a `localhost` certificate (openssl), an HTTPS receiver
// on 127.0.0.1, the egress settings that allow it, and signing keys made
// with `switchboard keys rotate`.

import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { AsyncQueue } from "../../src/index.js";

/** The key-encryption key that seals the test hub's signing keys (32 bytes of 7). */
export const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64");

export interface Certificates {
  caFile: string;
  keyFile: string;
  certFile: string;
}

/** A CA valid for two days and a `localhost` server certificate it signed. */
export function makeCertificates(dir: string): Certificates {
  const p = (f: string) => join(dir, f);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const run = (args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  run(["req", "-x509", ...ec, "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=switchboard-test-ca",
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]);
  run(["req", ...ec, "-keyout", p("leaf.key"), "-out", p("leaf.csr"), "-subj", "/CN=localhost"]);
  writeFileSync(p("leaf.ext"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  run(["x509", "-req", "-in", p("leaf.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
    "-out", p("leaf.pem"), "-days", "2", "-extfile", p("leaf.ext")]);
  return { caFile: p("ca.pem"), keyFile: p("leaf.key"), certFile: p("leaf.pem") };
}

export interface Delivery {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** An HTTPS endpoint on 127.0.0.1 that records every request and answers 200. */
export class WebhookReceiver {
  readonly deliveries = new AsyncQueue<Delivery>();
  private constructor(private readonly server: Server) {}

  static start(certs: Certificates): Promise<WebhookReceiver> {
    const server = createServer({ key: readFileSync(certs.keyFile), cert: readFileSync(certs.certFile) });
    const receiver = new WebhookReceiver(server);
    server.on("request", (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        receiver.deliveries.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.end("ok");
      });
    });
    return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(receiver)));
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  close(): Promise<void> {
    this.deliveries.end();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The hub settings that let it sign and send to `localhost:port` with the test CA. */
export function egressEnv(port: number, certs: Certificates): Record<string, string> {
  const target = JSON.stringify([`localhost:${port}`]);
  return {
    SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY: KEY_ENCRYPTION_KEY,
    SWITCHBOARD_EGRESS__ALLOWLIST: target,
    SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE: target,
    SWITCHBOARD_EGRESS__EXTRA_CA_FILE: certs.caFile,
  };
}

/** `switchboard migrate` on a data directory: the database operator commands then open (they never create one). */
export function migrate(dataDir: string): void {
  const bin = process.env.SWITCHBOARD_BIN as string;
  const env = { ...process.env } as Record<string, string>;
  delete env.SWITCHBOARD_BIN;
  execFileSync(bin, ["migrate", "--data-dir", dataDir], { env, stdio: ["ignore", "ignore", "pipe"] });
}

/** `switchboard keys rotate` on a data directory (with a given `whsk_` secret file, or a fresh key). */
export function rotateKey(dataDir: string, secretFile?: string): void {
  const bin = process.env.SWITCHBOARD_BIN as string;
  const env = { ...process.env, SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY: KEY_ENCRYPTION_KEY } as Record<string, string>;
  delete env.SWITCHBOARD_BIN;
  const args = ["keys", "rotate", "--data-dir", dataDir, ...(secretFile ? ["--secret-file", secretFile] : [])];
  execFileSync(bin, args, { env, stdio: ["ignore", "ignore", "pipe"] });
}
