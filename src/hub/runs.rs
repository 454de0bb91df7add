//! The hosted runs this process keeps alive (ADR 0031 §3): each run's stop
//! signal, so a REST stop ends it at once and a full hub refuses more.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(Default)]
pub struct LiveRuns {
    runs: Mutex<HashMap<Uuid, CancellationToken>>,
}

impl LiveRuns {
    /// Registers a run unless `max` are alive already.
    pub fn admit(&self, id: Uuid, max: usize) -> Option<CancellationToken> {
        let mut runs = self.runs.lock().expect("live runs lock");
        if runs.len() >= max {
            return None;
        }
        let stop = CancellationToken::new();
        runs.insert(id, stop.clone());
        Some(stop)
    }

    /// Signals the run to stop; false when this process does not run it.
    pub fn stop(&self, id: Uuid) -> bool {
        match self.runs.lock().expect("live runs lock").get(&id) {
            Some(stop) => {
                stop.cancel();
                true
            }
            None => false,
        }
    }

    pub fn remove(&self, id: Uuid) {
        self.runs.lock().expect("live runs lock").remove(&id);
    }

    pub fn len(&self) -> usize {
        self.runs.lock().expect("live runs lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
