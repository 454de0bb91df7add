// The live view: one EventSource on /console/api/stream. The first event
// is a `snapshot` (every section), then `changes` (the sections that
// changed), and `ended {reason}` when the session ends.

import type { Sections } from "./types";

export type Status = "connecting" | "live" | "reconnecting";

export interface LiveHandlers {
  sections(update: Partial<Sections>, snapshot: boolean): void;
  status(status: Status): void;
  ended(reason: string): void;
}

export function openLive(handlers: LiveHandlers): () => void {
  const source = new EventSource("/console/api/stream");
  const read = (snapshot: boolean) => (event: MessageEvent<string>) => {
    handlers.sections(JSON.parse(event.data) as Partial<Sections>, snapshot);
    handlers.status("live");
  };
  source.addEventListener("snapshot", read(true));
  source.addEventListener("changes", read(false));
  source.addEventListener("ended", (event: MessageEvent<string>) => {
    source.close();
    handlers.ended((JSON.parse(event.data) as { reason: string }).reason);
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      handlers.ended("unreachable");
    } else {
      handlers.status("reconnecting");
    }
  };
  return () => source.close();
}
