//! `switchboard agent list` and `switchboard app list`: so a lost id can
//! be found for `rotate-key`, `set-owner` or `app check`.

use uuid::Uuid;

use crate::config::Config;
use crate::domain::PrincipalKind;

/// A page of one kind's principals, one line each; says so when there are
/// none. `app list` adds each app's installation.
pub(super) async fn list(
    store: &dyn crate::store::Store,
    kind: PrincipalKind,
    (after, limit): (Option<Uuid>, Option<u32>),
    config: &Config,
) -> anyhow::Result<()> {
    let max = config.audit.page_max;
    let limit = limit.unwrap_or(config.audit.page_default);
    if !(1..=max).contains(&limit) {
        anyhow::bail!("--limit must be from 1 to {max} (audit.page_max)");
    }
    let page = store.principals(kind, after, limit).await?;
    if page.is_empty() {
        match after {
            None => println!("no {kind}s in this database"),
            Some(after) => println!("no {kind}s after {after}"),
        }
    }
    for p in &page {
        let mut line = format!(
            "{} {} {}",
            p.id,
            serde_json::to_string(&p.name).expect("a name serializes"),
            crate::domain::event::rfc3339(p.created_at)
        );
        match kind {
            PrincipalKind::Agent => {
                let owner = p.owner_id.map_or("-".to_string(), |o| o.to_string());
                line.push_str(&format!(" owner {owner}"));
            }
            PrincipalKind::App => {
                let installation = store.installation(p.id).await?;
                line.push_str(&match installation {
                    Some(i) => {
                        format!(" {} scopes {}", i.state.as_str(), i.effective().to_stored())
                    }
                    None => " not installed".to_string(),
                });
            }
            PrincipalKind::Person => {}
        }
        if p.disabled_at.is_some() {
            line.push_str(" disabled");
        }
        println!("{line}");
    }
    if page.len() == limit as usize {
        if let Some(last) = page.last() {
            println!("more after --after {}", last.id);
        }
    }
    Ok(())
}
