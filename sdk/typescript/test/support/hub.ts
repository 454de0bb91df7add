// A real `switchboard serve` for the tests: the binary from
// $SWITCHBOARD_BIN, on 127.0.0.1 port 0, with its own data directory; the
// base URL is read from the line the hub prints once it listens (as
// tests/it/support/hub.rs does).

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export const ADMIN_TOKEN = "test-operator-token-0123456789";
const RATE_CLASSES = ["default", "write", "message", "agent_runtime", "trigger", "interaction"];

export interface HubOptions {
  env?: Record<string, string>;
  /** Serve this data directory (prepared by CLI commands) instead of a fresh one. */
  dataDir?: string;
}

export class TestHub {
  private constructor(
    readonly base: string,
    readonly dir: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(options: HubOptions = {}): Promise<TestHub> {
    const bin = process.env.SWITCHBOARD_BIN;
    if (!bin) throw new Error("set SWITCHBOARD_BIN to the switchboard binary (e.g. target/debug/switchboard)");
    const dir = mkdtempSync(join(tmpdir(), "switchboard-ts-"));
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      SWITCHBOARD_ADMIN__TOKEN: ADMIN_TOKEN,
      RUST_LOG: "switchboard=debug,info",
    };
    // The hub reads every SWITCHBOARD_* variable as configuration: not this one.
    delete env.SWITCHBOARD_BIN;
    // Test-friendly limits: no rate class refuses bulk calls.
    for (const c of RATE_CLASSES) {
      env[`SWITCHBOARD_RATELIMIT__${c.toUpperCase()}__PER_SECOND`] = "1000000";
      env[`SWITCHBOARD_RATELIMIT__${c.toUpperCase()}__BURST`] = "1000000";
    }
    Object.assign(env, options.env ?? {});
    const log = openSync(join(dir, "hub.log"), "w");
    const child = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--data-dir", options.dataDir ?? join(dir, "data")], {
      env,
      stdio: ["ignore", "pipe", log],
    });
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the hub did not start:\n${readLog(dir)}`)), 60_000);
      const lines = createInterface({ input: child.stdout! });
      lines.on("line", (line) => {
        const prefix = "switchboard listening on ";
        if (line.startsWith(prefix)) {
          clearTimeout(timer);
          resolve(line.slice(prefix.length).trim());
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the hub exited (${code}) before listening:\n${readLog(dir)}`));
      });
    });
    return new TestHub(base, dir, child);
  }

  /** Sends a signal to the hub process (SIGSTOP freezes it: no pings, no answers). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  log(): string {
    return readLog(this.dir);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGKILL");
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async request(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (token) headers.authorization = `Bearer ${token}`;
    const r = await fetch(new URL(path, this.base), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // keep the text
    }
    return { status: r.status, body: parsed };
  }

  /** The value of a Prometheus counter, summed over the label sets that contain `labels`. */
  async metric(name: string, labels = ""): Promise<number> {
    const r = await fetch(new URL("/metrics", this.base));
    const text = await r.text();
    return text
      .split("\n")
      .filter((l) => l.startsWith(name) && l.includes(labels))
      .map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)))
      .filter((n) => Number.isFinite(n))
      .reduce((a, b) => a + b, 0);
  }
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, "hub.log"), "utf8");
  } catch {
    return "";
  }
}
