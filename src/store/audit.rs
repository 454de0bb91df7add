//! The audit of denials (ADR 0020 §4): aggregated request-mode denials in
//! `audit_denials`. Every column is a closed enum, an id, a time or a count,
//! so no text a caller wrote can reach the table.

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{parsed, placeholders, Arg, Database, Keyset, Row};
use super::StoreResult;
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::{Millis, PrincipalKind};

/// One denial as the decision made it: who, what, why, on what. No `String`
/// field, by design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DenialRecord {
    pub actor_id: Uuid,
    pub actor_kind: PrincipalKind,
    pub action: Action,
    pub reason: Reason,
    pub resource_kind: ResourceKind,
    /// The id the caller sent, parsed; nil for the hub.
    pub resource_id: Uuid,
}

/// An `audit_denials` row: the denials of one record's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// UUIDv7, minted when the window opened: pages go by it.
    pub id: Uuid,
    pub denial: DenialRecord,
    pub first_at: Millis,
    pub last_at: Millis,
    pub count: i64,
}

/// Which records a page holds; `None` filters nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub actor: Option<Uuid>,
    pub action: Option<Action>,
    pub reason: Option<Reason>,
}

#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Writes each record with its absolute `count` and `last_at`: a record
    /// flushed again keeps the larger of its stored and new values, so a
    /// retried flush counts nothing twice and a stale copy loses nothing.
    async fn flush_denials(&self, records: &[AuditRecord]) -> StoreResult<()>;

    /// Records matching `filter`, by id after `after`, at most `limit`.
    async fn denials(
        &self,
        filter: AuditFilter,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<AuditRecord>>;

    /// Deletes the records last seen before `before`; returns how many.
    async fn prune_denials(&self, before: Millis) -> StoreResult<u64>;
}

pub(super) const COLUMNS: &str =
    "id, actor_id, actor_kind, action, reason, resource_kind, resource_id, first_at, last_at, count";
const ARGS_PER_ROW: usize = 10;
/// Rows per upsert statement: 500 placeholders, far below either dialect's
/// limit, and one round trip for a typical flush.
const ROWS_PER_STATEMENT: usize = 50;

pub(super) fn audit_row(r: &Row) -> StoreResult<AuditRecord> {
    Ok(AuditRecord {
        id: r.id("id")?,
        denial: DenialRecord {
            actor_id: r.id("actor_id")?,
            actor_kind: parsed(r.text("actor_kind")?, "actor kind", PrincipalKind::parse)?,
            action: parsed(r.text("action")?, "action", Action::parse)?,
            reason: parsed(r.text("reason")?, "reason", Reason::parse)?,
            resource_kind: parsed(
                r.text("resource_kind")?,
                "resource kind",
                ResourceKind::parse,
            )?,
            resource_id: r.id("resource_id")?,
        },
        first_at: r.int("first_at")?,
        last_at: r.int("last_at")?,
        count: r.int("count")?,
    })
}

fn row_args(r: &AuditRecord) -> [Arg<'static>; ARGS_PER_ROW] {
    let d = &r.denial;
    [
        Arg::Id(r.id),
        Arg::Id(d.actor_id),
        Arg::Text(d.actor_kind.as_str()),
        Arg::Text(d.action.as_str()),
        Arg::Text(d.reason.as_str()),
        Arg::Text(d.resource_kind.as_str()),
        Arg::Id(d.resource_id),
        Arg::Int(r.first_at),
        Arg::Int(r.last_at),
        Arg::Int(r.count),
    ]
}

/// One multi-row upsert of `rows` records. Monotone: a record's count and
/// last time only grow, so two overlapping flushes (or a retried older
/// copy) can never regress a row. `CASE` rather than `GREATEST`/`MAX`,
/// which the two dialects spell differently.
fn upsert_sql(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|i| format!("({})", placeholders(i * ARGS_PER_ROW + 1, ARGS_PER_ROW)))
        .collect();
    format!(
        "INSERT INTO audit_denials ({COLUMNS}) VALUES {} \
         ON CONFLICT (id) DO UPDATE SET \
         count = CASE WHEN excluded.count > audit_denials.count \
           THEN excluded.count ELSE audit_denials.count END, \
         last_at = CASE WHEN excluded.last_at > audit_denials.last_at \
           THEN excluded.last_at ELSE audit_denials.last_at END",
        values.join(", ")
    )
}

#[async_trait]
impl<D: Database + Keyset> AuditStore for D {
    async fn flush_denials(&self, records: &[AuditRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for chunk in records.chunks(ROWS_PER_STATEMENT) {
            let args: Vec<Arg<'_>> = chunk.iter().flat_map(row_args).collect();
            tx.execute(&upsert_sql(chunk.len()), &args).await?;
        }
        tx.commit().await
    }

    async fn denials(
        &self,
        filter: AuditFilter,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<AuditRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_denials WHERE {} \
             AND ($2 IS NULL OR actor_id = $2) AND ($3 IS NULL OR action = $3) \
             AND ($4 IS NULL OR reason = $4) ORDER BY id LIMIT $5",
            D::after("id", 1)
        );
        let rows = self
            .read()
            .await?
            .fetch_all(
                &sql,
                &[
                    Arg::OptId(after),
                    Arg::OptId(filter.actor),
                    Arg::OptText(filter.action.map(Action::as_str)),
                    Arg::OptText(filter.reason.map(Reason::as_str)),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter().map(audit_row).collect()
    }

    async fn prune_denials(&self, before: Millis) -> StoreResult<u64> {
        self.write()
            .await?
            .execute(
                "DELETE FROM audit_denials WHERE last_at < $1",
                &[Arg::Int(before)],
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value a record can hold is read back from its stored name, so
    /// no flushed record is ever `Corrupt` on the way out.
    #[test]
    fn every_stored_name_parses_back() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
        }
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
        for k in ResourceKind::ALL {
            assert_eq!(ResourceKind::parse(k.as_str()), Some(k));
        }
        for p in [
            PrincipalKind::Agent,
            PrincipalKind::App,
            PrincipalKind::Person,
        ] {
            assert_eq!(PrincipalKind::parse(p.as_str()), Some(p));
        }
        assert_eq!(Reason::parse("because"), None);
        assert_eq!(ResourceKind::parse("row"), None);
    }

    #[test]
    fn one_statement_holds_its_rows_placeholders() {
        let sql = upsert_sql(2);
        assert!(
            sql.contains("($1, $2, $3, $4, $5, $6, $7, $8, $9, $10), ($11,"),
            "{sql}"
        );
        assert!(sql.contains("$20)"), "{sql}");
    }
}
