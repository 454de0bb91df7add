//! Acts on `sb.control` (ADR 0034 §4): another node revoked keys, disabled
//! a person or changed an app's installation, and this node closes its
//! sockets and drops its cached entries as that node did its own. The
//! database sweep (`revocations`) finds the same changes within
//! `gateway.revocation_check_interval_ms`, below `cluster.control_latency_ms`,
//! should a message be lost; acting twice is harmless.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use tracing::{info, warn};

use crate::cluster::control::Control;
use crate::cluster::{self, subjects, Kind};
use crate::hub::Hub;
use crate::rpc::close_code;

/// Subscribes to `sb.control` and acts on each message until shutdown;
/// nothing in `single` mode.
pub async fn spawn(hub: Arc<Hub>) {
    let Some(mut controls) = hub.cluster.subscribe(subjects::CONTROL).await else {
        return;
    };
    let tracked = hub.clone();
    tracked.tasks.spawn(async move {
        loop {
            let message = tokio::select! {
                m = controls.next() => m,
                _ = hub.shutdown.cancelled() => return,
            };
            let Some(message) = message else { return };
            cluster::count_received(Kind::Control);
            match Control::decode(&message.payload) {
                Some(control) => act(&hub, control).await,
                None => cluster::count_undecodable(Kind::Control),
            }
        }
    });
}

async fn act(hub: &Hub, control: Control) {
    match control {
        Control::KeysRevoked { principal, key_ids } => {
            // A revocation may be a person's disable: cached memberships
            // learn it first, as the sweep does.
            hub.memberships.invalidate_all();
            let closed = hub.registry.close_keys(
                principal,
                &key_ids,
                close_code::KEY_REVOKED,
                "key revoked",
            );
            if closed > 0 {
                info!(%principal, closed, "closed sockets of keys another node revoked");
            }
        }
        Control::Disabled { principal } => {
            hub.memberships.invalidate_all();
            let keys: Vec<String> = hub
                .registry
                .connections(principal)
                .into_iter()
                .map(|c| c.key_id)
                .collect();
            let closed =
                hub.registry
                    .close_keys(principal, &keys, close_code::KEY_REVOKED, "key revoked");
            if closed > 0 {
                info!(%principal, closed, "closed sockets of a person another node disabled");
            }
        }
        Control::InstallationChanged {
            app_id,
            uninstalled,
        } => {
            let apps = HashMap::from([(app_id, uninstalled)]);
            if let Err(e) = super::revocations::close_inactive_apps(hub, &apps).await {
                // The sweep reads the change again.
                warn!(app = %app_id, error = %e, "reading an installation another node changed failed");
            }
        }
    }
}
