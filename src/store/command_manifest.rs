//! The manifest's commands through an installation's life (ADR 0027 §2):
//! the rows an install writes, the upgrade's diff and the uninstall's
//! removal, each inside `InstallationStore`'s own transaction.

use uuid::Uuid;

use super::commands::{insert, CommandChanges, CommandSource};
use super::sql::{to_json, Arg, Executor};
use super::StoreResult;
use crate::domain::command::{diff, name_key};
use crate::domain::manifest::CommandDecl;
use crate::domain::Millis;

/// Install: one hub-wide row per manifest command, in the install's
/// transaction, after the installation row.
pub(super) async fn install_manifest(
    ex: &mut dyn Executor,
    owner: Uuid,
    commands: &[CommandDecl],
    now: Millis,
) -> StoreResult<CommandChanges> {
    let mut added = Vec::new();
    for c in commands {
        insert(ex, c, owner, CommandSource::Manifest, None, now).await?;
        added.push(c.name.clone());
    }
    Ok(CommandChanges {
        added,
        ..CommandChanges::default()
    })
}

/// Upgrade: the diff of the manifest's commands applied to the app's
/// `manifest` rows (API rows stay), in the upgrade's transaction. The
/// manifest's own count is bounded by its validation; a name the app
/// registered through the API is a `Conflict` naming it. The app may have
/// removed manifest commands itself (`app/command/remove`), so the answer
/// says what the rows saw: a removed one that is gone already is not
/// removed again, and a changed one that is gone comes back, added.
pub(super) async fn apply_upgrade(
    ex: &mut dyn Executor,
    owner: Uuid,
    old: &[CommandDecl],
    new: &[CommandDecl],
    now: Millis,
) -> StoreResult<CommandChanges> {
    let d = diff(old, new);
    let mut out = CommandChanges::default();
    for c in &d.removed {
        let removed = ex
            .execute(
                "UPDATE commands SET removed_at = $1, updated_at = $1 WHERE owner_id = $2 AND name_key = $3 \
                 AND source = 'manifest' AND conversation_id IS NULL AND removed_at IS NULL",
                &[Arg::Int(now), Arg::Id(owner), Arg::Text(&name_key(&c.name))],
            )
            .await?;
        if removed > 0 {
            out.removed.push(c.name.clone());
        }
    }
    for c in &d.changed {
        if change(ex, owner, c, now).await? {
            out.changed.push(c.name.clone());
        } else {
            insert(ex, c, owner, CommandSource::Manifest, None, now).await?;
            out.added.push(c.name.clone());
        }
    }
    for c in &d.added {
        insert(ex, c, owner, CommandSource::Manifest, None, now).await?;
        out.added.push(c.name.clone());
    }
    Ok(out)
}

/// The live manifest row of `c`'s name takes `c`'s declaration; `false`
/// when there is none (the app removed it).
async fn change(
    ex: &mut dyn Executor,
    owner: Uuid,
    c: &CommandDecl,
    now: Millis,
) -> StoreResult<bool> {
    let options = to_json(&c.options)?;
    let changed = ex
        .execute(
            "UPDATE commands SET name = $1, description = $2, required_level = $3, options = $4, \
             version = version + 1, updated_at = $5 WHERE owner_id = $6 AND name_key = $7 \
             AND source = 'manifest' AND conversation_id IS NULL AND removed_at IS NULL",
            &[
                Arg::Text(&c.name),
                Arg::Text(&c.description),
                Arg::Text(c.required_level.as_str()),
                Arg::Json(&options),
                Arg::Int(now),
                Arg::Id(owner),
                Arg::Text(&name_key(&c.name)),
            ],
        )
        .await?;
    Ok(changed > 0)
}

/// Uninstall: every live command of the app removed, in the uninstall's
/// transaction; their names, sorted.
pub(super) async fn remove_all(
    ex: &mut dyn Executor,
    owner: Uuid,
    now: Millis,
) -> StoreResult<CommandChanges> {
    let rows = ex
        .fetch_all(
            "UPDATE commands SET removed_at = $1, updated_at = $1 WHERE owner_id = $2 AND removed_at IS NULL \
             RETURNING name",
            &[Arg::Int(now), Arg::Id(owner)],
        )
        .await?;
    let mut removed = rows
        .iter()
        .map(|r| r.text("name"))
        .collect::<StoreResult<Vec<_>>>()?;
    removed.sort();
    Ok(CommandChanges {
        removed,
        ..CommandChanges::default()
    })
}
