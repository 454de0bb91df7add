//! The package a run starts from, verified again just before the start
//! (ADR 0031 §1): every card check on the bytes as read now, against the
//! catalogue's own copy of the card, and the fresh copy the child runs in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cards::{read_package, MANIFEST};
use crate::domain::card::{self, AppCard, CardError};
use crate::domain::hosted::RunRefusal;
use crate::store::{CardRecord, CardStore, StoreError};

/// Where a run's files come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The newest installed version's kept files.
    Card(String),
    /// A package directory holding an installed card.
    Dir(PathBuf),
}

/// A verified package: the card and exactly the bytes that were hashed.
pub struct Verified {
    pub card: AppCard,
    pub files: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Refused(#[from] RunRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(String),
}

fn card_refusal(e: CardError) -> RunRefusal {
    RunRefusal::Card {
        code: e.code(),
        message: format!("card refused ({}): {e}", e.code()),
    }
}

/// Reads and verifies the package, then checks the card is the catalogue's.
pub async fn load(
    store: &(impl CardStore + ?Sized),
    source: &Source,
) -> Result<Verified, LoadError> {
    let (app_json, files, symlinks) = match source {
        Source::Dir(dir) => {
            let p = read_package(dir).map_err(|e| LoadError::Io(e.to_string()))?;
            if let Some(name) = p.unreadable_names.first() {
                return Err(card_refusal(CardError::BadPath(name.clone())).into());
            }
            (p.app_json, p.files, p.symlinks)
        }
        Source::Card(id) => {
            let record = newest(store, id).await?;
            let files = store.card_files(&record.id, &record.version).await?;
            if files.is_empty() && !record.integrity.is_empty() {
                return Err(RunRefusal::PackageMissing(record.id, record.version).into());
            }
            (record.card_json.into_bytes(), files, Vec::new())
        }
    };
    let card = card::verify(&app_json, &files, &symlinks).map_err(card_refusal)?;
    let (_, value) = card::parse(&app_json).map_err(card_refusal)?;
    installed_as_is(store, &card, &value).await?;
    Ok(Verified { card, files })
}

/// The highest installed version of `id` (semver order, as `cards()` sorts).
async fn newest(store: &(impl CardStore + ?Sized), id: &str) -> Result<CardRecord, LoadError> {
    store
        .cards()
        .await?
        .into_iter()
        .rfind(|c| c.id == id)
        .ok_or_else(|| RunRefusal::CardNotFound(id.to_string()).into())
}

/// A run is of an installed card: the same id, version and signed content.
async fn installed_as_is(
    store: &(impl CardStore + ?Sized),
    card: &AppCard,
    value: &Value,
) -> Result<(), LoadError> {
    let canonical =
        serde_json_canonicalizer::to_string(value).map_err(|e| LoadError::Io(e.to_string()))?;
    let same = store
        .cards()
        .await?
        .into_iter()
        .any(|c| c.id == card.id && c.version == card.version && c.card_json == canonical);
    if !same {
        return Err(RunRefusal::CardNotInstalled(card.id.clone(), card.version.clone()).into());
    }
    Ok(())
}

/// The run's own copy: a new private directory holding exactly the
/// verified bytes (never a second read of the source), `app.json` left out.
pub fn fresh_copy(
    files: &BTreeMap<String, Vec<u8>>,
    work_dir: Option<&Path>,
    entry: &str,
    run: uuid::Uuid,
) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let (base, name) = copy_place(work_dir, run);
    // Named by the run, made exclusively (an existing one is an error), so
    // the orphan sweep finds the copy of a run whose process was killed.
    let dir = tempfile::Builder::new()
        .prefix(&name)
        .rand_bytes(0)
        .tempdir_in(base)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    for (rel, bytes) in files {
        if rel == MANIFEST {
            continue;
        }
        // Paths passed `card::verify` (relative, no `..`, no empty segment).
        let path = dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
        let mode = if rel == entry { 0o700 } else { 0o600 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(dir)
}

/// Where a run's fresh copy lives: `hosted.work_dir` (else the system's
/// temp dir) and the name given by its run id.
fn copy_place(work_dir: Option<&Path>, run: uuid::Uuid) -> (std::path::PathBuf, String) {
    match work_dir {
        Some(base) => (base.to_path_buf(), format!("run-{run}")),
        None => (std::env::temp_dir(), format!("switchboard-run-{run}")),
    }
}

/// Removes the copy of a run whose process was killed (the orphan sweep):
/// only a directory of that exact name on this host, never a link. True
/// when one was removed.
pub fn remove_orphan_copy(work_dir: Option<&Path>, run: uuid::Uuid) -> std::io::Result<bool> {
    let (base, name) = copy_place(work_dir, run);
    let path = base.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).map(|()| true),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
