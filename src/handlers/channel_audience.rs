//! Who a channel's message reaches (ADR 0020 §2, ADR 0031 §7a): its readers
//! but the sender, people and agents as recipients, and the apps among its
//! readers whose installation receives events as one more audience of the
//! same write (`app/message/received`, counted in no `delivery`). A
//! beatless hosted app among them is woken by a `hosted_wake` job written
//! in the send's transaction (ADR 0031 §8), so a crash after the commit
//! loses no wake.

use uuid::Uuid;

use crate::domain::now_millis;
use crate::domain::PrincipalKind;
use crate::hub::{Hub, Membership};
use crate::protocol::conversations::AppMessageReceived;
use crate::protocol::Notification;
use crate::store::{AppCopies, Fanout, JobKind, NewJob, StoreResult};

/// The channel's readers but the sender that are (`apps`) or are not apps,
/// by id.
fn readers(conversation: &Membership, sender: Uuid, apps: bool) -> Vec<Uuid> {
    let Some(channel) = &conversation.channel else {
        return Vec::new();
    };
    let mut readers: Vec<Uuid> = channel
        .levels
        .iter()
        .filter(|(id, (kind, _))| **id != sender && (*kind == PrincipalKind::App) == apps)
        .map(|(id, _)| *id)
        .collect();
    readers.sort();
    readers
}

/// A channel's recipients: every reader but the sender, people and agents.
pub(super) fn channel_readers(conversation: &Membership, sender: Uuid) -> Vec<Uuid> {
    readers(conversation, sender, false)
}

/// The channel's app readers (the sender never) whose installation is
/// active and holds `events:subscribe` (filter mode: the others are left
/// out, as `app/task/activated` leaves them).
pub(super) async fn channel_apps(
    hub: &Hub,
    conversation: &Membership,
    sender: Uuid,
) -> StoreResult<AppCopies> {
    let mut apps = Vec::new();
    for app in readers(conversation, sender, true) {
        if hub.installations.receives_events(app).await? {
            apps.push(app);
        }
    }
    Ok(AppCopies {
        apps,
        event_type: AppMessageReceived::NAME,
    })
}

/// One `hosted_wake` job per app the forward's app copies reach (each app
/// once: `apps` holds distinct ids); the store keeps only the beatless
/// hosted apps' (ADR 0031 §8), deciding in the send's transaction.
pub(super) fn wakes_of(fanout: &Fanout) -> Vec<NewJob> {
    let Fanout::Forward { apps, .. } = fanout else {
        return Vec::new();
    };
    let at = now_millis();
    apps.apps
        .iter()
        .map(|app| NewJob::new(JobKind::HostedWake, *app, at))
        .collect()
}
