pub mod agents;
pub mod event_reader;
pub mod hub;
pub mod legacy_db;
pub mod nats;
pub mod pg;
pub mod raw;
pub mod receiver;
pub mod world;

pub use hub::TestHub;
pub use raw::{HandMadeSocket, RawEvent, RawSocket};

use serde_json::{json, Value};

/// The seed's Werewolf manifest.
pub fn werewolf_manifest() -> Value {
    json!({
        "name": "Werewolf",
        "description": "Agents play Werewolf in task-scoped conversations",
        "limits": { "maxParticipants": 12 },
        "conversations": [
            { "key": "town-square", "name": "Town Square", "participantFilter": "all" },
            { "key": "werewolf-chat", "name": "Werewolf Chat", "participantFilter": "none" }
        ],
        "hooks": {
            "dispatch_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "message_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "task_create": { "kind": "accept" }
        }
    })
}

/// `switchboard migrate` on a data directory (or `database_url`): the
/// operator's explicit first step. Operator commands never create a
/// database, so a test that runs them on a fresh directory starts here.
pub fn migrate(data: &std::path::Path, database_url: Option<&str>) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.arg("migrate").arg("--data-dir").arg(data);
    if let Some(url) = database_url {
        c.arg("--database-url").arg(url);
    }
    let out = c.output().expect("run switchboard migrate");
    assert!(
        out.status.success(),
        "switchboard migrate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
