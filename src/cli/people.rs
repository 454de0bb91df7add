//! `switchboard person` and the owner commands of `switchboard agent`
//! (ADR 0020 §1), straight on the store like the other operator commands.
//! A running hub closes sockets on revoked keys (4003) within
//! `gateway.revocation_check_interval_ms`.

use clap::Subcommand;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{describe, revoke, rotate};
use crate::config::Config;
use crate::domain::PrincipalKind;
use crate::identity::{self, IdentityError};
use crate::store::IdentityStore;

#[derive(Subcommand)]
pub enum PersonCommand {
    /// Create a person and print its id and key (shown once).
    Create {
        /// The person's name, 1 to 100 characters.
        #[arg(long)]
        name: String,
        /// About the person (at most 2000 characters).
        #[arg(long)]
        description: Option<String>,
    },
    /// Issue a new key and revoke the old ones.
    RotateKey {
        /// The person's id.
        #[arg(long)]
        id: Uuid,
    },
    /// Revoke every key of the person.
    RevokeKey {
        /// The person's id.
        #[arg(long)]
        id: Uuid,
    },
    /// Revoke every key of the person and mark it disabled for good.
    Disable {
        /// The person's id.
        #[arg(long)]
        id: Uuid,
    },
}

pub(super) async fn person(command: PersonCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    match command {
        PersonCommand::Create { name, description } => {
            let doc = name_and_description(name, description);
            let r = identity::create_person(store.as_ref(), &doc, None)
                .await
                .map_err(describe)?;
            println!("person id:  {}", r.id);
            println!("person key: {}", r.key.plaintext);
            println!("The key is shown only once; store it now.");
            Ok(())
        }
        PersonCommand::RotateKey { id } => rotate(store.as_ref(), id, PrincipalKind::Person).await,
        PersonCommand::RevokeKey { id } => revoke(store.as_ref(), id, PrincipalKind::Person).await,
        PersonCommand::Disable { id } => match identity::disable_person(store.as_ref(), id).await {
            Ok(revoked) => {
                println!("disabled person {id}; revoked {} key(s)", revoked.len());
                Ok(())
            }
            Err(IdentityError::NotFound) => anyhow::bail!("no person with id {id}"),
            Err(e) => Err(describe(e)),
        },
    }
}

/// `switchboard agent set-owner --id A --owner P|--none`.
pub(super) async fn set_owner(
    store: &(impl IdentityStore + ?Sized),
    agent: Uuid,
    owner: Option<Uuid>,
) -> anyhow::Result<()> {
    match identity::set_owner(store, agent, owner).await {
        Ok(()) => {
            match owner {
                Some(owner) => println!("agent {agent} is owned by person {owner}"),
                None => println!("agent {agent} has no owner"),
            }
            Ok(())
        }
        Err(IdentityError::NotFound) => anyhow::bail!("no agent with id {agent}"),
        Err(IdentityError::OwnerRefused) => anyhow::bail!(
            "--owner: {} is not an active person",
            owner.unwrap_or_default()
        ),
        Err(e) => Err(describe(e)),
    }
}

/// The registration document of an agent or person.
pub(super) fn name_and_description(name: String, description: Option<String>) -> Value {
    let mut doc = json!({ "name": name });
    if let Some(d) = description {
        doc["description"] = Value::String(d);
    }
    doc
}
