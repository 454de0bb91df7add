//! The console's live view: one read of the registry, the hook-health
//! windows and the store, as named sections (`hub`, `connections`, `apps`,
//! `tasks`, `leases`, `denials`, `backlog`, `names`). The stream sends a
//! section again only when it changed. Ids, closed enums, counts, times and
//! principals' names only: no key, no message content, no manifest text.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::domain::event::rfc3339;
use crate::domain::{now_millis, Millis};
use crate::hub::Hub;
use crate::store::{AppOverview, Overview, StoreResult};

/// The view's sections by name.
pub type Sections = Map<String, Value>;

/// Reads everything the console shows, as of now.
pub async fn read(hub: &Hub, node: &str) -> StoreResult<Sections> {
    let now = now_millis();
    let limit = hub.config.console.list_limit;
    let overview = hub.store.overview(now, limit).await?;
    let apps = hub.store.apps_overview(limit).await?;
    let connections = hub.registry.all();
    let mut ids = BTreeSet::new();
    let mut sections = Sections::new();
    sections.insert("hub".into(), hub_section(hub, node, now));
    sections.insert(
        "connections".into(),
        connections_section(&connections, node, limit, &mut ids),
    );
    sections.insert("apps".into(), apps_section(hub, &apps, &mut ids));
    let stuck_ms = (hub.config.console.stuck_waiting_secs as i64).saturating_mul(1000);
    sections.insert(
        "tasks".into(),
        tasks_section(stuck_ms, &overview, now, &mut ids),
    );
    sections.insert("leases".into(), leases_section(&overview, &mut ids));
    sections.insert("denials".into(), denials_section(&overview, &mut ids));
    sections.insert("backlog".into(), backlog_section(&overview));
    let ids: Vec<Uuid> = ids.into_iter().collect();
    let names = hub.store.principal_names(&ids).await?;
    let names: BTreeMap<String, String> = names
        .into_iter()
        .map(|(id, name)| (id.to_string(), name))
        .collect();
    sections.insert("names".into(), json!(names));
    Ok(sections)
}

fn hub_section(hub: &Hub, node: &str, now: Millis) -> Value {
    let c = &hub.config.console;
    json!({
        "node": node,
        "now": rfc3339(now),
        "healthWindowSeconds": hub.hook_health.window().as_secs(),
        "stuckWaitingSeconds": c.stuck_waiting_secs,
        "pollIntervalMs": c.poll_interval_ms,
        "listLimit": c.list_limit,
    })
}

fn connections_section(
    open: &[crate::hub::registry::Connection],
    node: &str,
    limit: u32,
    ids: &mut BTreeSet<Uuid>,
) -> Value {
    let mut by_kind = BTreeMap::<&str, u64>::new();
    for c in open {
        *by_kind.entry(c.principal.kind.as_str()).or_default() += 1;
    }
    let rows: Vec<Value> = open
        .iter()
        .take(limit as usize)
        .map(|c| {
            ids.insert(c.principal.id);
            json!({
                "connectionId": c.id,
                "principalId": c.principal.id,
                "kind": c.principal.kind.as_str(),
                "node": node,
                "connectedAt": rfc3339(c.connected_at),
            })
        })
        .collect();
    json!({ "total": open.len(), "byKind": by_kind, "rows": rows })
}

fn apps_section(hub: &Hub, apps: &[AppOverview], ids: &mut BTreeSet<Uuid>) -> Value {
    let rows: Vec<Value> = apps
        .iter()
        .map(|a| {
            let id = a.app.principal.id;
            ids.insert(id);
            json!({
                "appId": id,
                "installation": a.installation.as_ref().map(crate::http::installations::installation_summary),
                "sockets": hub.registry.connections(id).len(),
                "methods": crate::http::app_health::health_methods(hub, &a.app),
            })
        })
        .collect();
    json!({ "rows": rows })
}

/// Tasks by state and the longest waiting, each marked `stuck` once it has
/// waited `stuck_ms` (`console.stuck_waiting_secs`).
fn tasks_section(stuck_ms: i64, o: &Overview, now: Millis, ids: &mut BTreeSet<Uuid>) -> Value {
    let by_state: BTreeMap<&str, i64> = o.tasks.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    let waiting: Vec<Value> = o
        .waiting
        .iter()
        .map(|t| {
            ids.insert(t.app_id);
            ids.insert(t.initiator_id);
            json!({
                "taskId": t.id,
                "appId": t.app_id,
                "initiatorId": t.initiator_id,
                "createdAt": rfc3339(t.created_at),
                "waitingSince": rfc3339(t.updated_at),
                "stuck": now.saturating_sub(t.updated_at) >= stuck_ms,
            })
        })
        .collect();
    let stuck = waiting.iter().filter(|t| t["stuck"] == true).count();
    json!({ "byState": by_state, "waiting": waiting, "stuckShown": stuck })
}

fn leases_section(o: &Overview, ids: &mut BTreeSet<Uuid>) -> Value {
    let count = |state: &str| {
        o.leases
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n)
    };
    let rows: Vec<Value> = o
        .live_leases
        .iter()
        .map(|l| {
            ids.insert(l.recipient_id);
            json!({
                "leaseId": l.id,
                "state": l.state,
                "messageId": l.message_id,
                "conversationId": l.conversation_id,
                "recipientId": l.recipient_id,
                "expiresAt": l.expires_at.map(rfc3339),
                "createdAt": rfc3339(l.created_at),
            })
        })
        .collect();
    json!({ "pending": count("pending"), "held": count("held"), "rows": rows })
}

fn denials_section(o: &Overview, ids: &mut BTreeSet<Uuid>) -> Value {
    let rows: Vec<Value> = o
        .denials
        .iter()
        .map(|r| {
            ids.insert(r.denial.actor_id);
            crate::http::audit::record_json(r)
        })
        .collect();
    json!({ "rows": rows })
}

fn backlog_section(o: &Overview) -> Value {
    let jobs: Vec<Value> = o
        .jobs
        .iter()
        .map(|j| {
            json!({
                "kind": j.kind,
                "total": j.total,
                "due": j.due,
                "locked": j.locked,
                "oldestRunAt": j.oldest_run_at.map(rfc3339),
            })
        })
        .collect();
    json!({
        "events": { "streams": o.events.streams, "unacked": o.events.unacked },
        "jobs": {
            "total": o.jobs.iter().map(|j| j.total).sum::<i64>(),
            "due": o.jobs.iter().map(|j| j.due).sum::<i64>(),
            "byKind": jobs,
        },
    })
}

/// The sections of `next` that differ from `sent`.
pub fn changed(sent: &Sections, next: &Sections) -> Sections {
    next.iter()
        .filter(|(name, value)| sent.get(name.as_str()) != Some(value))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WaitingTask;

    #[test]
    fn a_task_waiting_past_the_threshold_is_marked_stuck() {
        let task = |updated_at| WaitingTask {
            id: Uuid::now_v7(),
            app_id: Uuid::now_v7(),
            initiator_id: Uuid::now_v7(),
            created_at: 1_000,
            updated_at,
        };
        let overview = Overview {
            tasks: vec![("active".into(), 4), ("waiting".into(), 2)],
            waiting: vec![task(10_000), task(69_001)],
            ..Overview::default()
        };
        let mut ids = BTreeSet::new();
        let view = tasks_section(60_000, &overview, 70_000, &mut ids);
        assert_eq!(view["byState"], json!({"active": 4, "waiting": 2}));
        let stuck: Vec<&Value> = view["waiting"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["stuck"])
            .collect();
        assert_eq!(stuck, [&json!(true), &json!(false)]);
        assert_eq!(view["stuckShown"], json!(1));
        assert_eq!(ids.len(), 4, "apps and initiators are named");
    }

    #[test]
    fn only_changed_sections_are_sent_again() {
        let mut sent = Sections::new();
        sent.insert("a".into(), json!(1));
        sent.insert("b".into(), json!({"x": [1]}));
        let mut next = sent.clone();
        assert!(changed(&sent, &next).is_empty());
        next.insert("b".into(), json!({"x": [1, 2]}));
        next.insert("c".into(), json!(null));
        let delta = changed(&sent, &next);
        assert_eq!(delta.keys().collect::<Vec<_>>(), ["b", "c"]);
    }
}
