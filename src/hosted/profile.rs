//! `get_persona`, `set_persona` and `set_profile` (ADR 0031 §6), and the
//! profile `whoami` and `rooms_members` show: the app's `app_profiles`
//! row over its card's own persona file, name and tagline.

use std::collections::HashMap;

use serde_json::{json, Value};
use uuid::Uuid;

use super::calls::{store_failure, Answer, Caller};
use crate::domain::hosted::profile::{shown, Profile};
use crate::domain::hosted::wire::ErrorCode;

/// A stored profile's JSON, read back; a row that no longer parses is the
/// store's corruption, answered as a failure.
fn parse(text: &str) -> Result<Profile, (ErrorCode, String)> {
    serde_json::from_str(text).map_err(|e| {
        store_failure(crate::store::StoreError::Corrupt(format!(
            "app profile: {e}"
        )))
    })
}

impl Caller {
    /// `{persona, source}`: the persona set, else the card's
    /// `entry.persona` file, else `null` (`source` says which).
    pub(super) async fn get_persona(&self) -> Answer {
        let set = self
            .hub
            .store
            .app_profile(self.app)
            .await
            .map_err(store_failure)?;
        if let Some(persona) = set.persona {
            return Ok(json!({"persona": persona, "source": "set"}));
        }
        match &self.persona_file {
            None => Ok(json!({"persona": null, "source": "none"})),
            Some(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Ok(json!({"persona": text, "source": "card"})),
                Err(_) => Err((
                    ErrorCode::Error,
                    "the card's entry.persona file is not UTF-8 text".into(),
                )),
            },
        }
    }

    /// `{persona, stored: true}`; `null` goes back to the card's file.
    pub(super) async fn set_persona(&self, persona: Option<String>) -> Answer {
        self.hub
            .store
            .set_app_persona(self.app, persona.as_deref(), crate::domain::now_millis())
            .await
            .map_err(store_failure)?;
        Ok(json!({"persona": persona, "stored": true}))
    }

    /// `{profile}`: the profile now shown (absent members the card's).
    pub(super) async fn set_profile(&self, profile: Profile) -> Answer {
        let text = serde_json::to_string(&profile)
            .map_err(|_| (ErrorCode::Error, "internal error".to_string()))?;
        self.hub
            .store
            .set_app_profile(self.app, &text, crate::domain::now_millis())
            .await
            .map_err(store_failure)?;
        Ok(json!({"profile": shown(Some(&profile), &self.name, &self.tagline)}))
    }

    /// The app's own profile as others see it (`whoami`).
    pub(super) async fn own_profile(&self) -> Result<Profile, (ErrorCode, String)> {
        let set = self
            .hub
            .store
            .app_profile(self.app)
            .await
            .map_err(store_failure)?;
        let set = set.profile.as_deref().map(parse).transpose()?;
        Ok(shown(set.as_ref(), &self.name, &self.tagline))
    }

    /// The profiles the members of a room set, by member id (members that
    /// set none are left out: they are not hosted apps, or said nothing).
    pub(super) async fn profiles_of(&self, members: &[Uuid]) -> Result<Value, (ErrorCode, String)> {
        let set: HashMap<Uuid, String> = self
            .hub
            .store
            .app_profiles(members)
            .await
            .map_err(store_failure)?;
        let mut out = serde_json::Map::new();
        for id in members {
            if let Some(text) = set.get(id) {
                out.insert(
                    id.to_string(),
                    serde_json::to_value(parse(text)?).unwrap_or(Value::Null),
                );
            }
        }
        Ok(Value::Object(out))
    }
}
