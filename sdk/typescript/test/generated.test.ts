// The committed types are what the generator makes from schemas/ today:
// regenerate into a temporary file and compare.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const root = fileURLToPath(new URL("../../", import.meta.url));

test("src/generated/schemas.ts matches schemas/ (run `npm run generate` when it drifts)", () => {
  const dir = mkdtempSync(join(tmpdir(), "sdk-gen-"));
  try {
    const fresh = join(dir, "schemas.ts");
    execFileSync(process.execPath, [join(root, "scripts", "generate.mjs"), fresh], { cwd: root });
    const committed = readFileSync(join(root, "src", "generated", "schemas.ts"), "utf8");
    assert.ok(committed === readFileSync(fresh, "utf8"), "src/generated/schemas.ts is stale: run `npm run generate`");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("every method and event of rpc/openrpc.json has its entry in the generated maps", () => {
  const openrpc = JSON.parse(readFileSync(join(root, "..", "..", "rpc", "openrpc.json"), "utf8")) as { methods: Array<{ name: string }> };
  const generated = readFileSync(join(root, "src", "generated", "schemas.ts"), "utf8");
  for (const m of openrpc.methods) assert.ok(generated.includes(`  ${JSON.stringify(m.name)}: `), m.name);
});
