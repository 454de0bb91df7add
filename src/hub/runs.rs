//! The hosted runs this process keeps alive (ADR 0031 §3): each run's stop
//! signal, so a REST stop ends it at once and a full hub refuses more, and
//! this process's owner id, which its runs' rows carry and beat with so a
//! restarting hub sweeps only the runs whose process is gone.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct LiveRuns {
    /// Random per process: two processes on one database never share it.
    owner: Uuid,
    runs: Mutex<HashMap<Uuid, CancellationToken>>,
}

impl Default for LiveRuns {
    fn default() -> Self {
        LiveRuns {
            owner: Uuid::new_v4(),
            runs: Mutex::default(),
        }
    }
}

impl LiveRuns {
    /// The owner id this process's runs carry.
    pub fn owner(&self) -> Uuid {
        self.owner
    }

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
