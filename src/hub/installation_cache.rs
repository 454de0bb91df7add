//! The installations the hub decides on (ADR 0023 §6, "Loading"): every app
//! call and every gate needs its app's installation, and it changes rarely,
//! so it is cached by app id. This process's lifecycle writes call
//! [`InstallationCache::invalidate`] after their commit; other processes'
//! writes reach it through the revocation sweep. A decision refused on a
//! cached entry is decided again on [`InstallationCache::read_fresh`], so a
//! missed resume heals at once; a stale allow is bounded by the sweep, and
//! the verdict transactions check the row themselves (§7).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::store::{DynStore, InstallationRecord, StoreResult};

/// A bounded map from app id to its live installation
/// (`installation.cache_capacity`), evicting the oldest fill first. Only
/// live rows are cached: an app without one (pending, uninstalled, no app)
/// is read from the store each time, so random ids cannot fill it.
pub struct InstallationCache {
    store: DynStore,
    capacity: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<Uuid, (u64, Arc<InstallationRecord>)>,
    /// Fills in order with their stamps; a slot whose stamp no longer
    /// matches the map's was invalidated or filled again since.
    order: VecDeque<(Uuid, u64)>,
    /// Bumped by every invalidation: a fill whose read started before one
    /// is dropped, since the read may predate the change.
    generation: u64,
    next_stamp: u64,
}

/// An installation as read, and whether it came from the store (a miss or
/// a fresh read): a refusal decided on a store read needs no second one.
pub struct Looked {
    pub installation: Option<Arc<InstallationRecord>>,
    pub from_store: bool,
}

impl InstallationCache {
    pub fn new(store: DynStore, capacity: usize) -> InstallationCache {
        InstallationCache {
            store,
            capacity,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// The app's live installation, cached or else read (and cached).
    pub async fn get(&self, app_id: Uuid) -> StoreResult<Option<Arc<InstallationRecord>>> {
        Ok(self.lookup(app_id).await?.installation)
    }

    /// [`InstallationCache::get`], saying whether it read the store.
    pub async fn lookup(&self, app_id: Uuid) -> StoreResult<Looked> {
        if let Some(hit) = self.lock().map.get(&app_id) {
            return Ok(Looked {
                installation: Some(hit.1.clone()),
                from_store: false,
            });
        }
        Ok(Looked {
            installation: self.read_fresh(app_id).await?,
            from_store: true,
        })
    }

    /// The app's installation read from the store, replacing what the
    /// cache held: what a refusal on a cached entry is decided again on.
    pub async fn read_fresh(&self, app_id: Uuid) -> StoreResult<Option<Arc<InstallationRecord>>> {
        let generation = {
            let mut entries = self.lock();
            entries.map.remove(&app_id);
            entries.generation
        };
        let read = self.store.installation(app_id).await?.map(Arc::new);
        if let Some(record) = &read {
            self.fill(generation, record.clone());
        }
        Ok(read)
    }

    /// Whether events are written to the app's stream (ADR 0023 §6,
    /// "Fan-out"): only while its installation is active and holds
    /// `events:subscribe`, so nothing accrues for a suspended app (filter
    /// mode: the event is left out, nothing is refused or audited).
    pub async fn receives_events(&self, app_id: Uuid) -> StoreResult<bool> {
        Ok(self.get(app_id).await?.is_some_and(|i| i.receives_events()))
    }

    /// Forgets the app's installation. Call it after every store call that
    /// changes the row, also when that call failed (it may have committed).
    pub fn invalidate(&self, app_id: Uuid) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries.map.remove(&app_id);
    }

    fn fill(&self, generation: u64, record: Arc<InstallationRecord>) {
        let mut entries = self.lock();
        if entries.generation != generation {
            return;
        }
        let stamp = entries.next_stamp;
        entries.next_stamp += 1;
        entries.map.insert(record.app_id, (stamp, record.clone()));
        entries.order.push_back((record.app_id, stamp));
        while entries.map.len() > self.capacity {
            let Some((id, stamp)) = entries.order.pop_front() else {
                break;
            };
            if entries.map.get(&id).is_some_and(|(s, _)| *s == stamp) {
                entries.map.remove(&id);
            }
        }
        if entries.order.len() > 2 * self.capacity {
            let Entries { map, order, .. } = &mut *entries;
            order.retain(|(id, stamp)| map.get(id).is_some_and(|(s, _)| s == stamp));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().expect("installation cache lock")
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::installation::{InstallationState, Scope, ScopeSet};

    fn record(app_id: Uuid) -> InstallationRecord {
        let scopes = ScopeSet::of([Scope::EventsSubscribe]);
        InstallationRecord {
            id: Uuid::now_v7(),
            app_id,
            state: InstallationState::Active,
            requested: scopes,
            granted: scopes,
            created_at: 1,
            updated_at: 1,
        }
    }

    async fn cache(capacity: usize) -> InstallationCache {
        let dir = tempfile::tempdir().unwrap().keep();
        let mut config = crate::config::Config::default();
        config.server.data_dir = dir;
        let store = crate::store::open(&config).await.unwrap();
        InstallationCache::new(store, capacity)
    }

    #[tokio::test]
    async fn evicts_the_oldest_fill_beyond_capacity() {
        let c = cache(2).await;
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        for id in &ids {
            c.fill(0, Arc::new(record(*id)));
        }
        assert_eq!(c.len(), 2);
        assert!(!c.lock().map.contains_key(&ids[0]));
        assert!(c.lock().map.contains_key(&ids[2]));
    }

    #[tokio::test]
    async fn a_fill_that_raced_an_invalidation_is_dropped() {
        let c = cache(10).await;
        let id = Uuid::now_v7();
        let generation = c.lock().generation;
        c.invalidate(id);
        c.fill(generation, Arc::new(record(id)));
        assert_eq!(c.len(), 0);
    }

    #[tokio::test]
    async fn a_missing_installation_is_read_each_time_and_never_cached() {
        let c = cache(10).await;
        let looked = c.lookup(Uuid::now_v7()).await.unwrap();
        assert!(looked.installation.is_none() && looked.from_store);
        assert_eq!(c.len(), 0);
    }
}
