// Pieces every page uses: principal names, the confirmation dialog and
// the notice line an action leaves.

import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { shortId } from "./format";

export function Name(props: { id: string; names: Record<string, string> }) {
  const name = props.names[props.id];
  return (
    <span class="name" title={props.id}>
      {name ?? "(unnamed)"} <code>{shortId(props.id)}</code>
    </span>
  );
}

export interface Pending {
  question: string;
  confirmLabel: string;
  run: () => Promise<void>;
}

/** A modal question; nothing happens until "confirm" is pressed. */
export function Confirm(props: { pending: Pending | null; close: () => void }) {
  const [busy, setBusy] = useState(false);
  if (!props.pending) return null;
  const pending = props.pending;
  const confirm = async () => {
    setBusy(true);
    try {
      await pending.run();
    } finally {
      setBusy(false);
      props.close();
    }
  };
  return (
    <div class="overlay" role="presentation">
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="confirm-question" data-testid="confirm">
        <p id="confirm-question">{pending.question}</p>
        <div class="buttons">
          <button type="button" onClick={props.close} disabled={busy} data-testid="confirm-cancel">
            Cancel
          </button>
          <button type="button" class="danger" onClick={confirm} disabled={busy} data-testid="confirm-ok">
            {pending.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

export function Notice(props: { text: string; error: boolean }) {
  if (!props.text) return null;
  return (
    <p class={props.error ? "notice error" : "notice"} role="status" data-testid="notice">
      {props.text}
    </p>
  );
}

export function Section(props: { title: string; children: ComponentChildren; testid?: string }) {
  return (
    <section data-testid={props.testid}>
      <h2>{props.title}</h2>
      {props.children}
    </section>
  );
}

export function Empty(props: { text: string }) {
  return <p class="empty">{props.text}</p>;
}

export function Counts(props: { counts: Record<string, number>; order: string[]; testid: string }) {
  const keys = [...props.order, ...Object.keys(props.counts).filter((k) => !props.order.includes(k))];
  return (
    <dl class="counts" data-testid={props.testid}>
      {keys.map((k) => (
        <div key={k} data-count={k}>
          <dt>{k}</dt>
          <dd>{props.counts[k] ?? 0}</dd>
        </div>
      ))}
    </dl>
  );
}
