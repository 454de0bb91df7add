// The reconnect policy: exponential backoff with full jitter, capped per
// delay and in the number of attempts, so a fleet of clients that lost the
// hub at the same instant does not come back at the same instant, and a
// client whose hub is gone for good gives up instead of spinning.

export interface ReconnectPolicy {
  /** First delay's ceiling, in ms (default 100). */
  initialDelayMs?: number;
  /** No delay exceeds this, in ms (default 5000). */
  maxDelayMs?: number;
  /** Growth of the ceiling per attempt (default 2). */
  factor?: number;
  /** Attempts after a drop before the client gives up and closes (default 10). */
  maxAttempts?: number;
}

export const DEFAULT_RECONNECT: Required<ReconnectPolicy> = {
  initialDelayMs: 100,
  maxDelayMs: 5000,
  factor: 2,
  maxAttempts: 10,
};

/**
 * The delay before attempt `attempt` (0-based): uniform in
 * [0, min(max, initial * factor^attempt)], never below `floorMs` (a hub's
 * `retryAfterMs`), never above `maxDelayMs` unless the floor asks for more.
 */
export function backoffDelay(
  policy: Required<ReconnectPolicy>,
  attempt: number,
  floorMs = 0,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** attempt);
  return Math.max(floorMs, Math.floor(random() * ceiling));
}
