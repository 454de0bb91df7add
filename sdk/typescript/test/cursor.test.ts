// The file cursor store on its own: missing file, round trip, ordered
// saves, and a file that is not a cursor refused with its path.

import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FileCursorStore } from "../src/index.js";

test("the file cursor store round-trips, keeps the last of ordered saves, and refuses a foreign file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdk-cursor-unit-"));
  try {
    const path = join(dir, "a", "cursor.json");
    const store = new FileCursorStore(path);
    assert.equal(await store.load(), null, "no file yet: no cursor");
    await Promise.all([1, 2, 3, 4, 5].map((after) => store.save({ syncEpoch: "e1", after })));
    assert.deepEqual(await store.load(), { syncEpoch: "e1", after: 5 });
    assert.deepEqual(readdirSync(join(dir, "a")), ["cursor.json"], "no temporary file left behind");

    for (const bad of ['{"after": 3}', '{"syncEpoch": "e", "after": -1}', '{"syncEpoch": "e", "after": 1.5}']) {
      writeFileSync(path, bad);
      await assert.rejects(store.load(), (e: unknown) => e instanceof Error && e.message.includes(path), bad);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
