//! The catalogue of installed App Cards.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::sql::{to_json, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::Millis;

/// An installed App Card.
#[derive(Clone, Debug, PartialEq)]
pub struct CardRecord {
    pub id: String,
    pub version: String,
    pub author: String,
    pub primitives: Vec<String>,
    pub integrity: std::collections::BTreeMap<String, String>,
    /// The signed app.json in canonical form, `sig` included.
    pub card_json: String,
    pub installed_at: Millis,
}

#[async_trait]
pub trait CardStore: Send + Sync + 'static {
    /// Records a card. A new version of an id must come from the author of
    /// its newest version unless `force_author` (`Conflict` otherwise); the
    /// same id and version again is accepted only with identical contents.
    async fn install_card(&self, card: &CardRecord, force_author: bool) -> StoreResult<()> {
        self.install_card_with_files(card, &BTreeMap::new(), force_author)
            .await
    }

    /// As [`CardStore::install_card`], keeping the package's verified files
    /// in the same transaction so the hub can run the card later (ADR 0031
    /// §1). Files already kept for this id and version stay as they are
    /// (the integrity map pins them).
    async fn install_card_with_files(
        &self,
        card: &CardRecord,
        files: &BTreeMap<String, Vec<u8>>,
        force_author: bool,
    ) -> StoreResult<()>;

    /// The kept files of one installed version (empty when none were
    /// installed with it, as after an import).
    async fn card_files(&self, id: &str, version: &str) -> StoreResult<BTreeMap<String, Vec<u8>>>;

    /// Every installed card, by id then version order of installation.
    async fn cards(&self) -> StoreResult<Vec<CardRecord>>;
}

/// What differs per dialect in this area.
#[async_trait]
pub trait CardDialect {
    /// Serializes installs of `id` until commit, so two first publications
    /// of one id by different authors cannot both pass the author rule.
    async fn lock_cards(ex: &mut dyn Executor, id: &str) -> StoreResult<()>;
}

/// `primitives` and `integrity` are JSON in TEXT columns on both backends.
fn card_row(r: &Row) -> StoreResult<CardRecord> {
    let json = |col| -> StoreResult<String> { r.text(col) };
    Ok(CardRecord {
        id: r.text("id")?,
        version: r.text("version")?,
        author: r.text("author")?,
        primitives: serde_json::from_str(&json("primitives")?).map_err(super::sql::json_err)?,
        integrity: serde_json::from_str(&json("integrity")?).map_err(super::sql::json_err)?,
        card_json: r.text("card_json")?,
        installed_at: r.int("installed_at")?,
    })
}

/// Same id and version again: accepted only with identical contents.
fn reinstall(card: &CardRecord, stored_json: &str) -> StoreResult<()> {
    if stored_json == card.card_json {
        Ok(())
    } else {
        Err(StoreError::Conflict(format!(
            "{} {} is installed with other contents",
            card.id, card.version
        )))
    }
}

/// The author of the highest installed version owns the id.
fn check_author(card: &CardRecord, versions: &[Row], force_author: bool) -> StoreResult<()> {
    let mut newest: Option<(semver::Version, String)> = None;
    for r in versions {
        let Ok(v) = semver::Version::parse(&r.text("version")?) else {
            continue;
        };
        if newest.as_ref().is_none_or(|(n, _)| v > *n) {
            newest = Some((v, r.text("author")?));
        }
    }
    match newest {
        Some((_, author)) if author != card.author && !force_author => Err(StoreError::Conflict(
            format!(
                "{} is published by {author}; a version by another author needs the operator's force",
                card.id
            ),
        )),
        _ => Ok(()),
    }
}

/// The verified files of a version, kept once (a reinstall of identical
/// contents brings identical files).
async fn keep_files(
    ex: &mut dyn Executor,
    card: &CardRecord,
    files: &BTreeMap<String, Vec<u8>>,
) -> StoreResult<()> {
    for (path, content) in files {
        ex.execute(
            "INSERT INTO card_files (card_id, version, path, content) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (card_id, version, path) DO NOTHING",
            &[
                Arg::Text(&card.id),
                Arg::Text(&card.version),
                Arg::Text(path),
                Arg::Bytes(content),
            ],
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl<D: Database + CardDialect> CardStore for D {
    async fn install_card_with_files(
        &self,
        card: &CardRecord,
        files: &BTreeMap<String, Vec<u8>>,
        force_author: bool,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        D::lock_cards(&mut *tx, &card.id).await?;
        let existing = tx
            .fetch_optional(
                "SELECT author, card_json FROM cards WHERE id = $1 AND version = $2",
                &[Arg::Text(&card.id), Arg::Text(&card.version)],
            )
            .await?;
        if let Some(row) = existing {
            let stored = row.text("card_json")?;
            reinstall(card, &stored)?;
            keep_files(&mut *tx, card, files).await?;
            return tx.commit().await;
        }
        let versions = tx
            .fetch_all(
                "SELECT author, version FROM cards WHERE id = $1",
                &[Arg::Text(&card.id)],
            )
            .await?;
        check_author(card, &versions, force_author)?;
        let primitives = to_json(&card.primitives)?;
        let integrity = to_json(&card.integrity)?;
        tx.execute(
            "INSERT INTO cards (id, version, author, primitives, integrity, card_json, installed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                Arg::Text(&card.id),
                Arg::Text(&card.version),
                Arg::Text(&card.author),
                Arg::Text(&primitives),
                Arg::Text(&integrity),
                Arg::Text(&card.card_json),
                Arg::Int(card.installed_at),
            ],
        )
        .await?;
        keep_files(&mut *tx, card, files).await?;
        tx.commit().await
    }

    async fn card_files(&self, id: &str, version: &str) -> StoreResult<BTreeMap<String, Vec<u8>>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                "SELECT path, content FROM card_files WHERE card_id = $1 AND version = $2",
                &[Arg::Text(id), Arg::Text(version)],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.text("path")?, r.bytes("content")?)))
            .collect()
    }

    async fn cards(&self) -> StoreResult<Vec<CardRecord>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                "SELECT id, version, author, primitives, integrity, card_json, installed_at FROM cards \
                 ORDER BY id, installed_at",
                &[],
            )
            .await?;
        let mut list = rows.iter().map(card_row).collect::<StoreResult<Vec<_>>>()?;
        list.sort_by(|a, b| {
            let v = |c: &CardRecord| semver::Version::parse(&c.version).ok();
            a.id.cmp(&b.id).then_with(|| v(a).cmp(&v(b)))
        });
        Ok(list)
    }
}
