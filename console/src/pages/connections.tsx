// Who is connected: sockets by kind, node and age; an agent's keys can be
// revoked (its sockets close).

import { act } from "../api";
import { Counts, Empty, Name, Section, type Pending } from "../components";
import { age, secondsBetween } from "../format";
import type { Sections } from "../types";

export interface ActionProps {
  view: Sections;
  ask: (pending: Pending) => void;
  notify: (text: string, error: boolean) => void;
}

export function ConnectionsPage({ view, ask, notify }: ActionProps) {
  const c = view.connections;
  const revoke = (principalId: string) =>
    ask({
      question: `Revoke every key of agent ${view.names[principalId] ?? principalId}? Its sockets close and it must be given a new key.`,
      confirmLabel: "Revoke keys",
      run: async () => {
        const answer = await act<{ revoked: number }>(`/agents/${principalId}/keys/revoke`);
        notify(answer.ok ? `Revoked ${answer.body?.revoked ?? 0} key(s).` : answer.message, !answer.ok);
      },
    });
  return (
    <Section title={`Connections (${c.total})`} testid="page-connections">
      <Counts counts={c.byKind} order={["agent", "app", "person"]} testid="connections-by-kind" />
      {c.rows.length === 0 ? (
        <Empty text="Nobody is connected." />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Principal</th>
              <th>Kind</th>
              <th>Node</th>
              <th>Age</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {c.rows.map((row) => (
              <tr key={row.connectionId} data-testid="connection" data-principal={row.principalId} data-kind={row.kind}>
                <td>
                  <Name id={row.principalId} names={view.names} />
                </td>
                <td>{row.kind}</td>
                <td>{row.node}</td>
                <td>{age(secondsBetween(row.connectedAt, view.hub.now))}</td>
                <td>
                  {row.kind === "agent" ? (
                    <button type="button" class="danger" onClick={() => revoke(row.principalId)}>
                      Revoke keys
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
