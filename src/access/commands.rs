//! Commands as targets (ADR 0027 §3): the command row, the place it is
//! asked in, and the facts of its owning app there (its installation, read
//! from the store, and its own level on the place). The same three reads in
//! the same order whether the command exists or not (a missing one reads
//! the nil app's installation), so a hidden command costs what an unknown
//! one costs and answers as it does.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::load::{grants_of, place_of, Loaded, Loading, Reads, Source};
use super::Target;
use crate::domain::authz::{level, Facts, OwnerFacts, Place, Resource};
use crate::domain::installation::InstallationFacts;
use crate::domain::{Principal, PrincipalKind};
use crate::hub::{Hub, Membership};
use crate::rpc::RpcError;
use crate::store::{CommandRecord, StoreResult};

impl Target {
    /// A command invoked or completed in `conversation`: hidden, as an
    /// unknown command, unless its owner is reachable there.
    pub fn command(id: Uuid, conversation: Uuid) -> Target {
        Target::of(super::What::Command { id, conversation })
    }
}

impl super::Granted {
    /// The command of a [`Target::command`], with its place's membership.
    pub fn command(self) -> Result<(CommandRecord, Arc<Membership>), RpcError> {
        match self.loaded {
            Loaded::Command {
                command,
                membership,
            } => Ok((*command, membership)),
            _ => Err(super::mismatch()),
        }
    }
}

pub(super) async fn load(
    reads: &impl Reads,
    me: Uuid,
    target: &Target,
    id: Uuid,
    conversation: Uuid,
    source: Source,
) -> StoreResult<Loading> {
    let command = reads.command(id).await?;
    let fetched = reads.membership(conversation, source).await?;
    let owner = command.as_ref().map_or(Uuid::nil(), |c| c.owner_id);
    // From the store on both passes: the cache holds no negative entry,
    // so a hidden command's cached owner would cost less than the nil
    // owner of an unknown one.
    let (installation, _) = reads.installation(owner, Source::Store).await?;
    let from_store = fetched.from_store;
    let found = match (command, fetched.membership) {
        (Some(c), Some(m)) => place_of(&m).map(|place| (c, m, place)),
        _ => None,
    };
    let Some((command, membership, place)) = found else {
        let mut missing = Loading::missing(target, Vec::new());
        missing.from_store = from_store;
        return Ok(missing);
    };
    let owner = owner_facts(&membership, &place, command.owner_id, installation);
    Ok(Loading {
        resource: resource_of(&command, place),
        facts: Facts {
            grants: grants_of(&membership, me),
            owner: Some(owner),
            ..Facts::default()
        },
        loaded: Loaded::Command {
            command: Box::new(command),
            membership,
        },
        from_store,
    })
}

fn resource_of(c: &CommandRecord, place: Place) -> Resource {
    Resource::Command {
        place,
        owner: c.owner_id,
        required_level: c.required_level,
        scoped_to: c.conversation_id,
    }
}

/// The owning app's facts on `place`: its installation as given, and its
/// level there as for the app itself (a channel's readers map, capped at
/// write; a task conversation's app and participants).
pub fn owner_facts(
    membership: &Membership,
    place: &Place,
    owner: Uuid,
    installation: Option<InstallationFacts>,
) -> OwnerFacts {
    let grants = grants_of(membership, owner);
    OwnerFacts {
        installation,
        level: level::on_place(place, owner, PrincipalKind::App, &grants),
    }
}

/// The commands `principal` is offered in the place of `membership` (ADR
/// 0027 §3, Filter mode): those whose owner is reachable there and whose
/// `requiredLevel` the principal holds. Each owner's installation is read
/// once, from the cache.
pub async fn offered_commands(
    hub: &Hub,
    principal: Principal,
    membership: &Membership,
) -> StoreResult<Vec<CommandRecord>> {
    let Some(place) = place_of(membership) else {
        return Ok(Vec::new());
    };
    let rows = hub.store.commands_offered(membership.id).await?;
    let mut owners: HashMap<Uuid, OwnerFacts> = HashMap::new();
    for c in &rows {
        if owners.contains_key(&c.owner_id) {
            continue;
        }
        let installation = hub.installations.lookup(c.owner_id).await?.installation;
        let facts = owner_facts(
            membership,
            &place,
            c.owner_id,
            installation.map(|i| i.facts()),
        );
        owners.insert(c.owner_id, facts);
    }
    let grants = grants_of(membership, principal.id);
    let action = crate::domain::authz::Action::CommandRead;
    super::filter(hub, principal, action, rows, |c| {
        let facts = Facts {
            grants: grants.clone(),
            owner: owners.get(&c.owner_id).copied(),
            ..Facts::default()
        };
        (resource_of(c, place.clone()), facts)
    })
    .await
}

/// The answer to a command that went out of reach between the decision
/// and the transaction (or is not the app's own): the unknown command's,
/// byte for byte.
pub fn unknown_command(
    command: Uuid,
    conversation: Uuid,
    action: crate::domain::authz::Action,
) -> super::Refusal {
    let denial = crate::domain::authz::Denial {
        reason: crate::domain::authz::Reason::NoGrant,
        answer: crate::domain::authz::Answer::NotFound,
        named: None,
    };
    super::reject(&Target::command(command, conversation), action, denial)
}

/// An `app/autocomplete/answer` naming no open request of the app:
/// unknown, expired and another app's alike.
pub fn unknown_autocomplete_request(id: Uuid) -> crate::rpc::RpcError {
    crate::rpc::RpcError::new(
        crate::rpc::ErrorKind::NotFound,
        "autocomplete request not found",
    )
    .with_data(serde_json::json!({ "requestId": id }))
}
