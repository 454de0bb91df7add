//! The app principal of a card id (ADR 0031 §2): made on the first run with
//! a manifest derived from the card and installed at once, reused after,
//! and refused when its installation is not active.

use serde_json::{json, Value};
use uuid::Uuid;

use crate::config::{Config, InstallMode};
use crate::domain::card::primitives::is_beatless;
use crate::domain::card::AppCard;
use crate::domain::hosted::RunRefusal;
use crate::domain::installation::InstallationState;
use crate::identity::{self, IdentityError, Registrant};
use crate::store::{DynStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum PrincipalError {
    #[error(transparent)]
    Refused(#[from] RunRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the card does not make a valid app manifest: {0}")]
    Manifest(String),
}

/// The scopes a card's primitives need.
fn scopes(card: &AppCard) -> Vec<&'static str> {
    let has = |p: &str| card.primitives.iter().any(|c| c == p);
    let mut out = Vec::new();
    if has("send_message") || has("rooms") || has("invite_create") {
        out.push("messages:write");
    }
    if has("read_inbox") || has("wait_for_message") || is_beatless(&card.primitives) {
        out.push("events:subscribe");
    }
    out
}

fn clipped(s: &str, max: usize) -> String {
    let s: String = s.chars().filter(|c| !c.is_control()).take(max).collect();
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// The seed-000 manifest a hosted app registers with: static gates (the
/// app decides nothing by callback: it has no socket), one task
/// conversation template, and the scopes its primitives need.
pub fn manifest_of(card: &AppCard, config: &Config) -> Value {
    json!({
        "name": clipped(&card.name, 100),
        "description": clipped(&card.tagline, 2000),
        "limits": {"maxParticipants": config.limits.max_participants},
        "conversations": [
            {"key": "room", "name": clipped(&card.name, 100), "participantFilter": "all"}
        ],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"}
        },
        "scopes": scopes(card),
    })
}

/// The card's app, made and installed on its first run; refused unless
/// its installation is active.
pub async fn ensure(
    store: &DynStore,
    config: &Config,
    card: &AppCard,
) -> Result<Uuid, PrincipalError> {
    let app_id = match store.hosted_app(&card.id).await? {
        Some(id) => id,
        None => {
            store
                .bind_hosted_app(&card.id, Uuid::new_v4(), crate::domain::now_millis())
                .await?
        }
    };
    if store.app(app_id).await?.is_none() {
        create(store, config, card, app_id).await?;
    }
    store
        .set_hosted_beatless(app_id, is_beatless(&card.primitives))
        .await?;
    store
        .set_hosted_reply_policy(app_id, card.reply_policy)
        .await?;
    match store.installation(app_id).await?.map(|i| i.state) {
        Some(InstallationState::Active) => Ok(app_id),
        Some(InstallationState::Suspended) => Err(RunRefusal::AppSuspended.into()),
        Some(InstallationState::Uninstalled) | None => Err(RunRefusal::AppNotInstalled.into()),
    }
}

async fn create(
    store: &DynStore,
    config: &Config,
    card: &AppCard,
    app_id: Uuid,
) -> Result<(), PrincipalError> {
    let made = identity::register_app_as(
        store.as_ref(),
        app_id,
        &manifest_of(card, config),
        &config.manifest_bounds(),
        (InstallMode::Auto, Registrant::Operator),
        None,
    )
    .await;
    match made {
        // The key is dropped here: nobody holds it, the broker acts as the
        // app in-process.
        Ok(_) => Ok(()),
        Err(IdentityError::Invalid(problems)) => Err(PrincipalError::Manifest(
            problems
                .iter()
                .map(|p| format!("{} {}", p.pointer, p.message))
                .collect::<Vec<_>>()
                .join("; "),
        )),
        // A concurrent first run made it: what counts is that it exists.
        Err(IdentityError::Store(e)) if store.app(app_id).await?.is_some() => {
            tracing::debug!(error = %e, "hosted app made by a concurrent run");
            Ok(())
        }
        Err(IdentityError::Store(e)) => Err(e.into()),
        Err(other) => Err(PrincipalError::Manifest(other.to_string())),
    }
}
