// The live view's sections, as `GET /console/api/stream` sends them
// (src/http/console/view.rs). Ids, closed enums, counts, times and names.

export interface HubInfo {
  node: string;
  now: string;
  healthWindowSeconds: number;
  stuckWaitingSeconds: number;
  pollIntervalMs: number;
  listLimit: number;
}

export interface ConnectionRow {
  connectionId: string;
  principalId: string;
  kind: "agent" | "app" | "person";
  node: string;
  connectedAt: string;
}

export interface Connections {
  total: number;
  byKind: Record<string, number>;
  rows: ConnectionRow[];
}

export interface MethodHealth {
  method: string;
  gate?: string;
  policy?: string;
  timeoutMs?: number;
  count: number;
  outcomes: Record<string, number>;
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface Installation {
  installationId: string;
  state: "active" | "suspended" | "uninstalled";
  scopes: { requested: string[]; granted: string[]; effective: string[] };
}

export interface AppRow {
  appId: string;
  installation: Installation | null;
  sockets: number;
  methods: MethodHealth[];
}

export interface WaitingTask {
  taskId: string;
  appId: string;
  initiatorId: string;
  createdAt: string;
  waitingSince: string;
  stuck: boolean;
}

export interface Tasks {
  byState: Record<string, number>;
  waiting: WaitingTask[];
  stuckShown: number;
}

export interface LeaseRow {
  leaseId: string;
  state: "pending" | "held";
  messageId: string;
  conversationId: string;
  recipientId: string;
  expiresAt: string | null;
  createdAt: string;
}

export interface Leases {
  pending: number;
  held: number;
  rows: LeaseRow[];
}

export interface DenialRow {
  id: string;
  actorId: string;
  actorKind: string;
  action: string;
  reason: string;
  resourceKind: string;
  resourceId: string;
  firstAt: string;
  lastAt: string;
  count: number;
}

export interface JobKind {
  kind: string;
  total: number;
  due: number;
  locked: number;
  oldestRunAt: string | null;
}

export interface Backlog {
  events: { streams: number; unacked: number };
  jobs: { total: number; due: number; byKind: JobKind[] };
}

export interface Sections {
  hub: HubInfo;
  connections: Connections;
  apps: { rows: AppRow[] };
  tasks: Tasks;
  leases: Leases;
  denials: { rows: DenialRow[] };
  backlog: Backlog;
  names: Record<string, string>;
}

export interface GateCheck {
  gate: string;
  method: string;
  timeoutMs: number;
  outcome: string;
  latencyMs?: number;
  decodes?: boolean;
  decodeError?: { pointer: string; message: string };
  error?: { code: number; message: string };
  reason?: string;
}

export interface CheckResult {
  appId: string;
  ok: boolean;
  gates: GateCheck[];
}
