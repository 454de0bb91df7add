// Waiting on things with deadlines, never on the clock alone.

import type { EventEmitter } from "node:events";

/** Resolves with `promise`, or rejects naming `what` when `ms` pass first. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** The next `event` from an emitter-like client, within `ms`. */
export function nextEmit(target: { once(event: string, l: (...a: any[]) => void): unknown }, event: string, ms: number): Promise<any[]> {
  return within(ms, `event ${event}`, new Promise((resolve) => target.once(event, (...args: any[]) => resolve(args))));
}

/** Reads events until `want` of them match `pred`, within `ms`; returns every event read. */
export async function readUntil<T>(iterator: AsyncIterator<T>, ms: number, done: (seen: T[]) => boolean): Promise<T[]> {
  const seen: T[] = [];
  await within(
    ms,
    "events",
    (async () => {
      while (!done(seen)) {
        const r = await iterator.next();
        if (r.done) throw new Error(`the event stream ended after ${seen.length} events`);
        seen.push(r.value);
      }
    })(),
  );
  return seen;
}

export type { EventEmitter };
