// The read-only pages: tasks (stuck `waiting` ones highlighted), leases,
// the audit of denials, and the event-log and job backlog.

import { Counts, Empty, Name, Section } from "../components";
import { age, secondsBetween, shortId, time } from "../format";
import type { Sections } from "../types";

export function TasksPage({ view }: { view: Sections }) {
  const t = view.tasks;
  return (
    <Section title="Tasks" testid="page-tasks">
      <Counts counts={t.byState} order={["waiting", "active", "failed", "closed"]} testid="tasks-by-state" />
      <h3>
        Waiting ({t.waiting.length} shown, {t.stuckShown} stuck past {view.hub.stuckWaitingSeconds} s)
      </h3>
      {t.waiting.length === 0 ? (
        <Empty text="No task is waiting." />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Task</th>
              <th>App</th>
              <th>Initiator</th>
              <th>Waiting for</th>
            </tr>
          </thead>
          <tbody>
            {t.waiting.map((task) => (
              <tr key={task.taskId} class={task.stuck ? "stuck" : ""} data-testid="waiting-task" data-stuck={String(task.stuck)}>
                <td>
                  <code>{shortId(task.taskId)}</code>
                </td>
                <td>
                  <Name id={task.appId} names={view.names} />
                </td>
                <td>
                  <Name id={task.initiatorId} names={view.names} />
                </td>
                <td>
                  {age(secondsBetween(task.waitingSince, view.hub.now))}
                  {task.stuck ? <strong> stuck</strong> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function LeasesPage({ view }: { view: Sections }) {
  const l = view.leases;
  return (
    <Section title="Leases" testid="page-leases">
      <Counts counts={{ pending: l.pending, held: l.held }} order={["pending", "held"]} testid="leases-by-state" />
      {l.rows.length === 0 ? (
        <Empty text="No lease is pending or held." />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Lease</th>
              <th>State</th>
              <th>Recipient</th>
              <th>Conversation</th>
              <th>Expires</th>
            </tr>
          </thead>
          <tbody>
            {l.rows.map((lease) => (
              <tr key={lease.leaseId} data-testid="lease">
                <td>
                  <code>{shortId(lease.leaseId)}</code>
                </td>
                <td>{lease.state}</td>
                <td>
                  <Name id={lease.recipientId} names={view.names} />
                </td>
                <td>
                  <code>{shortId(lease.conversationId)}</code>
                </td>
                <td>{time(lease.expiresAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function DenialsPage({ view }: { view: Sections }) {
  const rows = view.denials.rows;
  return (
    <Section title="Denials" testid="page-denials">
      {rows.length === 0 ? (
        <Empty text="Nothing was denied." />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Last</th>
              <th>Actor</th>
              <th>Action</th>
              <th>Reason</th>
              <th>Resource</th>
              <th>Count</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id} data-testid="denial">
                <td>{time(d.lastAt)}</td>
                <td>
                  <Name id={d.actorId} names={view.names} /> <small>{d.actorKind}</small>
                </td>
                <td>{d.action}</td>
                <td>{d.reason}</td>
                <td>
                  {d.resourceKind} <code>{shortId(d.resourceId)}</code>
                </td>
                <td>{d.count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function BacklogPage({ view }: { view: Sections }) {
  const b = view.backlog;
  return (
    <Section title="Backlog" testid="page-backlog">
      <h3>Event logs</h3>
      <Counts
        counts={{ "unacknowledged events": b.events.unacked, "logs behind": b.events.streams }}
        order={["unacknowledged events", "logs behind"]}
        testid="event-backlog"
      />
      <h3>Jobs</h3>
      <Counts counts={{ total: b.jobs.total, due: b.jobs.due }} order={["total", "due"]} testid="job-backlog" />
      {b.jobs.byKind.length === 0 ? (
        <Empty text="No job is queued." />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Kind</th>
              <th>Total</th>
              <th>Due</th>
              <th>Running</th>
              <th>Earliest run</th>
            </tr>
          </thead>
          <tbody>
            {b.jobs.byKind.map((j) => (
              <tr key={j.kind} data-testid="job-kind">
                <td>{j.kind}</td>
                <td>{j.total}</td>
                <td>{j.due}</td>
                <td>{j.locked}</td>
                <td>{time(j.oldestRunAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
