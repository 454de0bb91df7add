//! What the hook, claim and node-loss tests share beside the harness.

use std::future::Future;
use std::time::{Duration, Instant};

use super::harness::Settings;

/// The harness's settings with more `SWITCHBOARD_*` variables.
pub fn with_env(env: &[(&str, &str)]) -> Settings {
    Settings {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Settings::default()
    }
}

/// Waits until `check` holds, trying again every 50 ms for at most 30 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut retry = tokio::time::interval(Duration::from_millis(50));
    loop {
        retry.tick().await;
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
    }
}
