// Where a client keeps its place in its event log between processes. The
// hub replays every event after `{after, syncEpoch}` on connect, so a
// client that saves the seq of the last event it processed resumes with no
// loss; saving after processing (never before) makes it at-least-once.

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** A position in one principal's event log (`resume` of the connects). */
export interface Cursor {
  syncEpoch: string;
  after: number;
}

/** Pluggable persistence of the cursor: a file, a database row, a key-value store. */
export interface CursorStore {
  load(): Promise<Cursor | null>;
  save(cursor: Cursor): Promise<void>;
}

/** Keeps the cursor in memory: resumes across reconnects, not across restarts. */
export class MemoryCursorStore implements CursorStore {
  private cursor: Cursor | null = null;
  async load(): Promise<Cursor | null> {
    return this.cursor;
  }
  async save(cursor: Cursor): Promise<void> {
    this.cursor = { ...cursor };
  }
}

/**
 * Keeps the cursor in a JSON file, replaced atomically (write a sibling,
 * then rename), so a crash mid-save leaves the old cursor or the new one,
 * never half of either. Saves are serialized in call order.
 */
export class FileCursorStore implements CursorStore {
  private chain: Promise<void> = Promise.resolve();
  constructor(readonly path: string) {}

  async load(): Promise<Cursor | null> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw e;
    }
    const value = JSON.parse(text) as Partial<Cursor>;
    if (typeof value.syncEpoch !== "string" || !Number.isSafeInteger(value.after) || (value.after as number) < 0) {
      throw new Error(`${this.path}: not a cursor file (syncEpoch, after)`);
    }
    return { syncEpoch: value.syncEpoch, after: value.after as number };
  }

  save(cursor: Cursor): Promise<void> {
    const next = this.chain.then(() => this.write(cursor));
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async write(cursor: Cursor): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.tmp`;
    await writeFile(tmp, JSON.stringify({ syncEpoch: cursor.syncEpoch, after: cursor.after }));
    await rename(tmp, this.path);
  }
}
