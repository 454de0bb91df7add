// The console's page: the login form until a session exists, then the
// live view's pages (hash routes, so no path but /console is ever asked
// for and no secret can end up in a URL).

import { render } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { login, logout, sessionStatus } from "./api";
import { Confirm, Notice, type Pending } from "./components";
import { openLive, type Status } from "./live";
import { AppsPage } from "./pages/apps";
import { ConnectionsPage } from "./pages/connections";
import { BacklogPage, DenialsPage, LeasesPage, TasksPage } from "./pages/tables";
import type { Sections } from "./types";
import "./style.css";

const PAGES = [
  ["connections", "Connections"],
  ["apps", "Apps"],
  ["tasks", "Tasks"],
  ["leases", "Leases"],
  ["denials", "Denials"],
  ["backlog", "Backlog"],
] as const;
type Page = (typeof PAGES)[number][0];

function currentPage(): Page {
  const name = location.hash.replace(/^#\/?/, "");
  return (PAGES.find(([p]) => p === name)?.[0] ?? "connections") as Page;
}

const ENDED: Record<string, string> = {
  idle: "The session ended after a while unused. Log in again.",
  expired: "The session reached its lifetime. Log in again.",
  logged_out: "You are logged out.",
  shutdown: "The hub is shutting down.",
  unreachable: "The hub cannot be reached.",
};

function Login(props: { done: () => void; reason: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    const answer = await login(token);
    setBusy(false);
    setToken("");
    if (answer.ok) props.done();
    else setError(answer.message);
  };
  return (
    <main class="login">
      <h1>switchboard console</h1>
      {props.reason ? <p class="notice">{ENDED[props.reason] ?? props.reason}</p> : null}
      <form onSubmit={submit} data-testid="login">
        <label for="token">Operator token (admin.token)</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          required
        />
        <button type="submit" disabled={busy}>
          Log in
        </button>
        {error ? <p class="notice error">{error}</p> : null}
      </form>
    </main>
  );
}

function merge(view: Partial<Sections> | null, update: Partial<Sections>, snapshot: boolean): Partial<Sections> {
  return snapshot || !view ? update : { ...view, ...update };
}

function complete(view: Partial<Sections> | null): view is Sections {
  return !!view && ["hub", "connections", "apps", "tasks", "leases", "denials", "backlog", "names"].every((k) => k in view);
}

function Console(props: { ended: (reason: string) => void }) {
  const [page, setPage] = useState<Page>(currentPage());
  const [view, setView] = useState<Partial<Sections> | null>(null);
  const [status, setStatus] = useState<Status>("connecting");
  const [pending, setPending] = useState<Pending | null>(null);
  const [notice, setNotice] = useState({ text: "", error: false });
  useEffect(() => {
    const onHash = () => setPage(currentPage());
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);
  useEffect(
    () =>
      openLive({
        sections: (update, snapshot) => setView((v) => merge(v, update, snapshot)),
        status: setStatus,
        ended: props.ended,
      }),
    [],
  );
  const notify = useCallback((text: string, error: boolean) => setNotice({ text, error }), []);
  const leave = async () => {
    await logout();
    props.ended("logged_out");
  };
  const actions = { ask: setPending, notify };
  return (
    <div class="console">
      <header class="top">
        <h1>switchboard</h1>
        <nav>
          {PAGES.map(([p, label]) => (
            <a key={p} href={`#/${p}`} class={p === page ? "current" : ""} data-testid={`nav-${p}`}>
              {label}
            </a>
          ))}
        </nav>
        <span class={`live live-${status}`} data-testid="live-status">
          {status}
          {complete(view) ? ` · ${view.hub.node}` : ""}
        </span>
        <button type="button" onClick={leave} data-testid="logout">
          Log out
        </button>
      </header>
      <Notice text={notice.text} error={notice.error} />
      <main>
        {!complete(view) ? (
          <p class="empty">Reading the hub…</p>
        ) : page === "connections" ? (
          <ConnectionsPage view={view} {...actions} />
        ) : page === "apps" ? (
          <AppsPage view={view} {...actions} />
        ) : page === "tasks" ? (
          <TasksPage view={view} />
        ) : page === "leases" ? (
          <LeasesPage view={view} />
        ) : page === "denials" ? (
          <DenialsPage view={view} />
        ) : (
          <BacklogPage view={view} />
        )}
      </main>
      <Confirm pending={pending} close={() => setPending(null)} />
    </div>
  );
}

function App() {
  const [session, setSession] = useState<"unknown" | "in" | "out">("unknown");
  const [reason, setReason] = useState("");
  useEffect(() => {
    sessionStatus().then((live) => setSession(live ? "in" : "out"));
  }, []);
  if (session === "unknown") return <p class="empty">Loading…</p>;
  if (session === "out")
    return (
      <Login
        reason={reason}
        done={() => {
          setReason("");
          setSession("in");
        }}
      />
    );
  return (
    <Console
      ended={(why) => {
        setReason(why);
        setSession("out");
      }}
    />
  );
}

render(<App />, document.getElementById("console")!);
