// Requests to the hub that serves the page, and nowhere else (the CSP's
// connect-src 'self' holds the browser to it). The session lives in the
// HttpOnly `sb_console` cookie; actions echo the `sb_console_csrf` cookie
// in `X-Console-CSRF`. Nothing is kept in localStorage or sessionStorage.

const API = "/console/api";

export interface Answer<T> {
  ok: boolean;
  status: number;
  body: T | null;
  message: string;
}

function csrfToken(): string {
  const prefix = "sb_console_csrf=";
  const entry = document.cookie
    .split(";")
    .map((c) => c.trim())
    .find((c) => c.startsWith(prefix));
  return entry ? entry.slice(prefix.length) : "";
}

async function send<T>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
  const headers: Record<string, string> = { "X-Console-CSRF": csrfToken() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch {
    return { ok: false, status: 0, body: null, message: "the hub cannot be reached" };
  }
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  const error = (parsed as { error?: { message?: string } } | null)?.error;
  return {
    ok: response.ok,
    status: response.status,
    body: response.ok ? (parsed as T) : null,
    message: error?.message ?? (response.ok ? "" : `the hub answered ${response.status}`),
  };
}

export async function sessionStatus(): Promise<boolean> {
  const answer = await send<{ authenticated: boolean }>("GET", "/session");
  return answer.ok && answer.body?.authenticated === true;
}

export function login(token: string): Promise<Answer<unknown>> {
  return send("POST", "/session", { token });
}

export function logout(): Promise<Answer<unknown>> {
  return send("DELETE", "/session");
}

export function act<T>(path: string): Promise<Answer<T>> {
  return send<T>("POST", path, {});
}
