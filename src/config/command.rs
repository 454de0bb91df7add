//! `[command]`: the bounds of the slash commands a principal declares
//! (ADR 0023 §1; issue 16 registers them, manifests are checked now).

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::manifest;
use crate::protocol::commands::{AUTOCOMPLETE_VALUE_MAX, CLIENT_INVOCATION_ID_MAX};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandConfig {
    /// Most commands one principal (an app's manifest) may declare.
    pub max_per_principal: usize,
    /// Longest description of a command or of one of its options.
    pub description_max_chars: usize,
    /// How long an asker waits for an app's autocomplete choices, at most
    /// (ADR 0027 §8): then it gets none.
    pub autocomplete_timeout_ms: u64,
    /// Most autocomplete choices an asker is shown.
    pub autocomplete_max_choices: usize,
    /// Longest string option value an invoke or an autocomplete passes, in
    /// characters: the value is kept in the app's durable event.
    pub option_value_max_chars: usize,
    /// Longest `clientInvocationId` (the schema carries its default, 64).
    pub client_invocation_id_max_chars: usize,
    /// Longest value an asker types for autocomplete (the schema carries
    /// its default, 100).
    pub autocomplete_value_max_chars: usize,
}

impl Default for CommandConfig {
    fn default() -> Self {
        CommandConfig {
            max_per_principal: manifest::DEFAULT_MAX_COMMANDS,
            description_max_chars: manifest::DEFAULT_DESCRIPTION_MAX_CHARS,
            autocomplete_timeout_ms: 3_000,
            autocomplete_max_choices: 25,
            option_value_max_chars: 1_000,
            client_invocation_id_max_chars: CLIENT_INVOCATION_ID_MAX,
            autocomplete_value_max_chars: AUTOCOMPLETE_VALUE_MAX,
        }
    }
}

/// Upper bounds that keep one manifest a reasonable document.
const MAX_PER_PRINCIPAL_LIMIT: usize = 10_000;
const DESCRIPTION_MAX_CHARS_LIMIT: usize = 2_000;
/// An asker is a person typing: longer than this is no autocomplete.
const AUTOCOMPLETE_TIMEOUT_LIMIT_MS: u64 = 30_000;
const AUTOCOMPLETE_MAX_CHOICES_LIMIT: usize = 100;
/// One value stays a small part of an event.
const OPTION_VALUE_MAX_CHARS_LIMIT: usize = 10_000;
const CLIENT_INVOCATION_ID_MAX_CHARS_LIMIT: usize = 255;
const AUTOCOMPLETE_VALUE_MAX_CHARS_LIMIT: usize = 1_000;

impl CommandConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("command.max_per_principal", self.max_per_principal as u64),
            (
                "command.description_max_chars",
                self.description_max_chars as u64,
            ),
            (
                "command.autocomplete_timeout_ms",
                self.autocomplete_timeout_ms,
            ),
            (
                "command.autocomplete_max_choices",
                self.autocomplete_max_choices as u64,
            ),
            (
                "command.option_value_max_chars",
                self.option_value_max_chars as u64,
            ),
            (
                "command.client_invocation_id_max_chars",
                self.client_invocation_id_max_chars as u64,
            ),
            (
                "command.autocomplete_value_max_chars",
                self.autocomplete_value_max_chars as u64,
            ),
        ])?;
        for (key, value, limit) in [
            (
                "command.option_value_max_chars",
                self.option_value_max_chars,
                OPTION_VALUE_MAX_CHARS_LIMIT,
            ),
            (
                "command.client_invocation_id_max_chars",
                self.client_invocation_id_max_chars,
                CLIENT_INVOCATION_ID_MAX_CHARS_LIMIT,
            ),
            (
                "command.autocomplete_value_max_chars",
                self.autocomplete_value_max_chars,
                AUTOCOMPLETE_VALUE_MAX_CHARS_LIMIT,
            ),
        ] {
            if value > limit {
                anyhow::bail!("{key} must be at most {limit}");
            }
        }
        if self.autocomplete_timeout_ms > AUTOCOMPLETE_TIMEOUT_LIMIT_MS {
            anyhow::bail!(
                "command.autocomplete_timeout_ms must be at most {AUTOCOMPLETE_TIMEOUT_LIMIT_MS}"
            );
        }
        if self.autocomplete_max_choices > AUTOCOMPLETE_MAX_CHOICES_LIMIT {
            anyhow::bail!(
                "command.autocomplete_max_choices must be at most {AUTOCOMPLETE_MAX_CHOICES_LIMIT}"
            );
        }
        if self.max_per_principal > MAX_PER_PRINCIPAL_LIMIT {
            anyhow::bail!("command.max_per_principal must be at most {MAX_PER_PRINCIPAL_LIMIT}");
        }
        if self.description_max_chars > DESCRIPTION_MAX_CHARS_LIMIT {
            anyhow::bail!(
                "command.description_max_chars must be at most {DESCRIPTION_MAX_CHARS_LIMIT}"
            );
        }
        Ok(())
    }
}
