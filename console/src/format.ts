// Display helpers: ages against the hub's clock, short ids, latencies.

export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

/** Seconds from `since` to the hub's `now`, both RFC 3339. */
export function secondsBetween(since: string, now: string): number {
  return Math.max(0, Math.floor((Date.parse(now) - Date.parse(since)) / 1000));
}

export function age(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  return value < 10 ? `${value.toFixed(2)} ms` : `${Math.round(value)} ms`;
}

export function time(value: string | null | undefined): string {
  if (!value) return "–";
  return value.replace("T", " ").replace(/\.\d+Z$/, "Z");
}
