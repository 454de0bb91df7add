pub mod agents;
pub mod event_reader;
pub mod hub;
pub mod legacy_db;
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
