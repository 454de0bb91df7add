// The Werewolf port plays one full round against a real hub, checked as
// tests/it/werewolf.rs checks the Rust one.

import assert from "node:assert/strict";
import { test } from "node:test";
import { TestHub } from "../../test/support/hub.js";
import { PLAYERS, WOLVES, playRound } from "./game.js";

test("werewolf: one full round", async () => {
  const hub = await TestHub.start();
  try {
    const summary = await playRound(hub.base);
    assert.equal(summary.wolves.length, WOLVES);
    assert.ok(!summary.wolves.includes(summary.victim), "the wolves killed a villager");
    assert.equal(summary.nightBlocked, PLAYERS - WOLVES, "every villager's night talk was blocked");
    for (const recipients of summary.wolfChatRecipients) {
      assert.ok(recipients.every((r) => summary.wolves.includes(r)), "wolf chat reaches wolves only");
    }
    assert.deepEqual(summary.speakers, summary.turnOrder, "the day's turns were kept");
    assert.equal(summary.speakers.length, PLAYERS - 1, "every living agent spoke once");
    assert.ok(summary.wolves.includes(summary.lynched), "the evidence convicted a wolf");
  } finally {
    await hub.stop();
  }
});
