//! A decided message's fan-out (ADR 0020 §1, ADR 0031 §7a): its
//! recipients, each copy named by its recipient's kind, and in a channel
//! the app readers that hear it beside them. An agent's or person's send
//! and an app's interaction reply reach a channel's audience through the
//! same function, so a reply's app copies and beatless wakes are a send's
//! (ADR 0031, 2026-12-02 third pass).

use uuid::Uuid;

use super::channel_audience::{channel_apps, channel_readers, wakes_of};
use crate::domain::conversation::ConversationKind;
use crate::hub::{Hub, Membership};
use crate::protocol::conversations::{MessageReceived, PersonMessageReceived};
use crate::protocol::Notification;
use crate::store::{AppCopies, Fanout, NewJob, PersonCopies, StoreResult};

/// A forward to `recipients`, each event named by its recipient's kind
/// (ADR 0020 §1).
pub(super) fn forward(conversation: &Membership, recipients: Vec<Uuid>) -> Fanout {
    forward_with(conversation, recipients, AppCopies::NONE)
}

/// [`forward`] that `apps` also hear (a channel's, outside its recipients).
fn forward_with(conversation: &Membership, recipients: Vec<Uuid>, apps: AppCopies) -> Fanout {
    let people = PersonCopies {
        people: conversation.people_among(&recipients),
        event_type: PersonMessageReceived::NAME,
    };
    Fanout::Forward {
        recipients,
        event_type: MessageReceived::NAME,
        people,
        apps,
    }
}

/// A channel message of `sender`: its readers but the sender as
/// recipients, and its app readers but the sender that receive events as
/// the apps' copies.
pub(super) async fn channel_forward(
    hub: &Hub,
    conversation: &Membership,
    sender: Uuid,
) -> StoreResult<Fanout> {
    let apps = channel_apps(hub, conversation, sender).await?;
    let readers = channel_readers(conversation, sender);
    Ok(forward_with(conversation, readers, apps))
}

/// An app's own message outside a send (an interaction's reply): in a
/// channel, what a send of the app reaches, with a `hosted_wake` job per
/// beatless app among the copies (written with the message); elsewhere its
/// conversation's participants but the app, and no job.
pub(super) async fn app_message(
    hub: &Hub,
    conversation: &Membership,
    app: Uuid,
) -> StoreResult<(Fanout, Vec<NewJob>)> {
    let fanout = match conversation.kind {
        ConversationKind::Channel => channel_forward(hub, conversation, app).await?,
        _ => forward(conversation, conversation.recipients_but(app)),
    };
    let jobs = wakes_of(&fanout);
    Ok((fanout, jobs))
}
