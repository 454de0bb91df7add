//! The hosted store's persona and profile of each app (ADR 0031 §6,
//! `get_persona`, `set_persona`, `set_profile`): one `app_profiles` row per
//! app, written by upserts that touch only their own column.

use std::collections::HashMap;

use uuid::Uuid;

use super::sql::{placeholders, Arg, Database};
use super::StoreResult;
use crate::domain::Millis;

/// What an app set; `None` where it set nothing (the card's own persona
/// file, name and tagline then stand).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppProfile {
    pub persona: Option<String>,
    /// The profile object as JSON text (`domain::hosted::profile`).
    pub profile: Option<String>,
}

pub(super) async fn app_profile(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
) -> StoreResult<AppProfile> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT persona, profile FROM app_profiles WHERE app_id = $1",
            &[Arg::Id(app_id)],
        )
        .await?;
    Ok(match row {
        Some(r) => AppProfile {
            persona: r.opt_text("persona")?,
            profile: r.opt_text("profile")?,
        },
        None => AppProfile::default(),
    })
}

pub(super) async fn set_persona(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    persona: Option<&str>,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    tx.execute(
        "INSERT INTO app_profiles (app_id, persona, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (app_id) DO UPDATE SET persona = $2, updated_at = $3",
        &[Arg::Id(app_id), Arg::OptText(persona), Arg::Int(now)],
    )
    .await?;
    tx.commit().await
}

pub(super) async fn set_profile(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    profile: &str,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    tx.execute(
        "INSERT INTO app_profiles (app_id, profile, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (app_id) DO UPDATE SET profile = $2, updated_at = $3",
        &[Arg::Id(app_id), Arg::Text(profile), Arg::Int(now)],
    )
    .await?;
    tx.commit().await
}

/// The profiles set by any of `ids` (500 ids a statement).
pub(super) async fn profiles_of(
    db: &(impl Database + ?Sized),
    ids: &[Uuid],
) -> StoreResult<HashMap<Uuid, String>> {
    let mut out = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let mut ex = db.read().await?;
    for chunk in ids.chunks(500) {
        let sql = format!(
            "SELECT app_id, profile FROM app_profiles \
             WHERE profile IS NOT NULL AND app_id IN ({})",
            placeholders(1, chunk.len())
        );
        let args: Vec<Arg> = chunk.iter().map(|id| Arg::Id(*id)).collect();
        for row in &ex.fetch_all(&sql, &args).await? {
            out.insert(row.id("app_id")?, row.text("profile")?);
        }
    }
    Ok(out)
}
