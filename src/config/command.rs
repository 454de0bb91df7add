//! `[command]`: the bounds of the slash commands a principal declares
//! (ADR 0023 §1; issue 16 registers them, manifests are checked now).

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::manifest;

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
}

impl Default for CommandConfig {
    fn default() -> Self {
        CommandConfig {
            max_per_principal: manifest::DEFAULT_MAX_COMMANDS,
            description_max_chars: manifest::DEFAULT_DESCRIPTION_MAX_CHARS,
            autocomplete_timeout_ms: 3_000,
            autocomplete_max_choices: 25,
        }
    }
}

/// Upper bounds that keep one manifest a reasonable document.
const MAX_PER_PRINCIPAL_LIMIT: usize = 10_000;
const DESCRIPTION_MAX_CHARS_LIMIT: usize = 2_000;
/// An asker is a person typing: longer than this is no autocomplete.
const AUTOCOMPLETE_TIMEOUT_LIMIT_MS: u64 = 30_000;
const AUTOCOMPLETE_MAX_CHOICES_LIMIT: usize = 100;

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
        ])?;
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
