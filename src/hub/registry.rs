//! Who is connected. Several sockets per principal are normal (an agent on
//! two machines, an app with a standby); callbacks to an app go to its newest
//! open socket, which is what a restarting app expects: the fresh process takes
//! over while the old one drains.

use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;
use uuid::Uuid;

use crate::domain::{Principal, PrincipalKind};
use crate::rpc::Peer;
use crate::telemetry::names;

#[derive(Clone)]
pub struct Connection {
    pub id: Uuid,
    pub principal: Principal,
    pub key_id: String,
    pub peer: Peer,
    /// When the socket authenticated (the console shows its age).
    pub connected_at: crate::domain::Millis,
    order: u64,
}

#[derive(Default)]
pub struct Registry {
    by_principal: DashMap<Uuid, Vec<Connection>>,
    next_order: AtomicU64,
}

impl Registry {
    pub fn add(&self, id: Uuid, principal: Principal, key_id: String, peer: Peer) {
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        self.by_principal
            .entry(principal.id)
            .or_default()
            .push(Connection {
                id,
                principal,
                key_id,
                peer,
                connected_at: crate::domain::now_millis(),
                order,
            });
        metrics::gauge!(names::CONNECTIONS, "kind" => principal.kind.as_str()).increment(1.0);
    }

    pub fn remove(&self, principal: Principal, id: Uuid) {
        let mut removed = false;
        if let Some(mut list) = self.by_principal.get_mut(&principal.id) {
            let before = list.len();
            list.retain(|c| c.id != id);
            removed = list.len() != before;
        }
        self.by_principal
            .remove_if(&principal.id, |_, list| list.is_empty());
        if removed {
            metrics::gauge!(names::CONNECTIONS, "kind" => principal.kind.as_str()).decrement(1.0);
        }
    }

    /// Every open socket of a principal.
    pub fn connections(&self, principal_id: Uuid) -> Vec<Connection> {
        self.by_principal
            .get(&principal_id)
            .map(|l| l.iter().filter(|c| !c.peer.is_closed()).cloned().collect())
            .unwrap_or_default()
    }

    /// The socket that receives an app's callbacks: its newest open one.
    pub fn callback_target(&self, app_id: Uuid) -> Option<Connection> {
        self.connections(app_id)
            .into_iter()
            .filter(|c| c.principal.kind == PrincipalKind::App)
            .max_by_key(|c| c.order)
    }

    /// One open socket of an app, by its id: where a call the cluster's
    /// presence table routed here goes (ADR 0035).
    pub fn app_connection(&self, app_id: Uuid, connection_id: Uuid) -> Option<Connection> {
        self.connections(app_id)
            .into_iter()
            .find(|c| c.id == connection_id && c.principal.kind == PrincipalKind::App)
    }

    /// Closes every open socket authenticated with one of these keys and
    /// counts them (sockets already closing are not counted again).
    pub fn close_keys(
        &self,
        principal_id: Uuid,
        key_ids: &[String],
        code: u16,
        reason: &str,
    ) -> usize {
        let mut closed = 0;
        for c in self.connections(principal_id) {
            if key_ids.contains(&c.key_id) && !c.peer.is_closed() {
                c.peer.close(code, reason);
                closed += 1;
            }
        }
        closed
    }

    /// Closes every open socket of an app, whichever key it connected
    /// with (an installation change is about the app, not a key), and
    /// counts them.
    pub fn close_app(&self, app_id: Uuid, code: u16, reason: &str) -> usize {
        let open = self.connections(app_id);
        for c in &open {
            c.peer.close(code, reason);
        }
        open.len()
    }

    /// Every open socket of every principal, oldest first (the console's
    /// view of who is connected).
    pub fn all(&self) -> Vec<Connection> {
        let mut open: Vec<Connection> = self
            .by_principal
            .iter()
            .flat_map(|e| {
                e.value()
                    .iter()
                    .filter(|c| !c.peer.is_closed())
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        open.sort_by_key(|c| c.order);
        open
    }

    pub fn len(&self) -> usize {
        self.by_principal.iter().map(|e| e.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
