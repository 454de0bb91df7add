// An unbounded queue read as an async iterator: the socket pushes, one
// consumer pulls. A failure ends the iteration with that error after the
// items already queued, so nothing received is lost to the consumer.

export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiters: Array<{ resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }> = [];
  private ended = false;
  private failure: unknown = undefined;
  private iterating = false;

  push(item: T): void {
    if (this.ended) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve({ value: item, done: false });
    else this.items.push(item);
  }

  /** No more items; waiting readers finish (or throw `error`, when given). */
  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    for (const w of this.waiters.splice(0)) {
      if (error === undefined) w.resolve({ value: undefined, done: true });
      else w.reject(error);
    }
  }

  get size(): number {
    return this.items.length;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift() as T, done: false });
    if (this.ended) {
      return this.failure === undefined
        ? Promise.resolve({ value: undefined, done: true })
        : Promise.reject(this.failure);
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterating) throw new Error("the event stream has one reader; it is already being read");
    this.iterating = true;
    return { next: () => this.next() };
  }
}
