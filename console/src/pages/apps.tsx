// Apps: installation state, scopes and per-gate health over the window;
// suspend or resume (with a confirmation) and run the app's check.

import { useState } from "preact/hooks";
import { act } from "../api";
import { Empty, Name, Section } from "../components";
import { ms } from "../format";
import type { AppRow, CheckResult, GateCheck, MethodHealth } from "../types";
import type { ActionProps } from "./connections";

function outcomes(o: Record<string, number>): string {
  const entries = Object.entries(o);
  return entries.length === 0 ? "–" : entries.map(([k, n]) => `${k} ${n}`).join(", ");
}

function failing(m: MethodHealth): boolean {
  return Object.keys(m.outcomes).some((k) => k !== "ok");
}

function Health({ methods }: { methods: MethodHealth[] }) {
  return (
    <table class="health">
      <thead>
        <tr>
          <th>Gate / method</th>
          <th>Policy</th>
          <th>Calls</th>
          <th>p50</th>
          <th>p99</th>
          <th>Outcomes</th>
        </tr>
      </thead>
      <tbody>
        {methods.map((m) => (
          <tr key={m.method} class={failing(m) ? "failing" : ""} data-testid="health" data-method={m.method} data-count={m.count}>
            <td>
              {m.gate ?? m.method}
              {m.gate ? <small> {m.method}</small> : null}
            </td>
            <td>{m.policy ? `${m.policy}${m.timeoutMs ? ` (${m.timeoutMs} ms)` : ""}` : "–"}</td>
            <td>{m.count}</td>
            <td data-testid="p50">{ms(m.p50Ms)}</td>
            <td data-testid="p99">{ms(m.p99Ms)}</td>
            <td>{outcomes(m.outcomes)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function gateDetail(g: GateCheck): string {
  if (g.decodeError) return `${g.decodeError.pointer || "/"}: ${g.decodeError.message}`;
  if (g.error) return `error ${g.error.code}: ${g.error.message}`;
  if (g.reason) return g.reason;
  return g.latencyMs === undefined ? "" : `${ms(g.latencyMs)} of ${g.timeoutMs} ms`;
}

function CheckView({ result }: { result: CheckResult }) {
  return (
    <div class={result.ok ? "check ok" : "check failed"} data-testid="check-result" data-ok={String(result.ok)}>
      <p>{result.ok ? "Every gate answered well in time." : "Some gates did not answer well in time."}</p>
      {result.gates.length === 0 ? (
        <Empty text="No gate is answered by a hook." />
      ) : (
        <ul>
          {result.gates.map((g) => (
            <li key={g.gate} class={g.outcome === "ok" ? "gate-ok" : "gate-failed"} data-testid="check-gate" data-gate={g.gate} data-outcome={g.outcome}>
              <strong>{g.gate}</strong> {g.outcome} <span>{gateDetail(g)}</span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function AppCard({ app, names, ask, notify }: { app: AppRow; names: Record<string, string> } & Omit<ActionProps, "view">) {
  const [check, setCheck] = useState<CheckResult | null>(null);
  const [checking, setChecking] = useState(false);
  const state = app.installation?.state ?? "not installed";
  const name = names[app.appId] ?? app.appId;
  const runCheck = async () => {
    setChecking(true);
    const answer = await act<CheckResult>(`/apps/${app.appId}/check`);
    setChecking(false);
    if (answer.ok && answer.body) setCheck(answer.body);
    else notify(answer.message, true);
  };
  const transition = (to: "suspend" | "resume") =>
    ask({
      question:
        to === "suspend"
          ? `Suspend ${name}? Its sockets close and its gates fail closed until it is resumed.`
          : `Resume ${name}? It may connect and answer its gates again.`,
      confirmLabel: to === "suspend" ? "Suspend" : "Resume",
      run: async () => {
        const answer = await act(`/apps/${app.appId}/${to}`);
        notify(answer.ok ? `${name}: ${to === "suspend" ? "suspended" : "resumed"}.` : answer.message, !answer.ok);
      },
    });
  return (
    <article class="app" data-testid="app" data-app={app.appId} data-state={state}>
      <header>
        <h3>
          <Name id={app.appId} names={names} />
        </h3>
        <span class={`state state-${state.replace(" ", "-")}`}>{state}</span>
        <span data-testid="sockets">{app.sockets} socket(s)</span>
      </header>
      <p class="scopes">Scopes: {app.installation?.scopes.effective.join(", ") || "none"}</p>
      <Health methods={app.methods} />
      <div class="buttons">
        <button type="button" onClick={runCheck} disabled={checking} data-testid="run-check">
          {checking ? "Checking…" : "Run check"}
        </button>
        {state === "active" ? (
          <button type="button" class="danger" onClick={() => transition("suspend")} data-testid="suspend">
            Suspend
          </button>
        ) : null}
        {state === "suspended" ? (
          <button type="button" onClick={() => transition("resume")} data-testid="resume">
            Resume
          </button>
        ) : null}
      </div>
      {check ? <CheckView result={check} /> : null}
    </article>
  );
}

export function AppsPage({ view, ask, notify }: ActionProps) {
  const rows = view.apps.rows;
  return (
    <Section title={`Apps (${rows.length})`} testid="page-apps">
      <p class="hint">Health over the last {view.hub.healthWindowSeconds} s, in this hub's memory.</p>
      {rows.length === 0 ? (
        <Empty text="No app is registered." />
      ) : (
        rows.map((app) => <AppCard key={app.appId} app={app} names={view.names} ask={ask} notify={notify} />)
      )}
    </Section>
  );
}
