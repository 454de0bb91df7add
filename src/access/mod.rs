//! The access layer (ADR 0020 §3, "Loading: one step per handler"): what
//! stands between a request and `domain::authz::authorize`. A handler names
//! what the request is about ([`Target`]) and the [`Action`]; [`check`]
//! loads the row and the facts, decides in Request mode, and answers either
//! [`Granted`], carrying what it loaded so the handler reads nothing twice,
//! or the one refusal [`reject`] builds from the kind and the id the caller
//! sent. Lists keep their SQL and drop what [`filter`] refuses.
//!
//! Hidden equals missing by construction: a missing row is
//! `Resource::Missing(kind)`, the loader reads the same things in the same
//! order either way, each read the same number of store statements (a
//! denial decided on a cache hit is decided again on the store; one
//! decided on a store read is not), and the answer is built from the
//! request, never from the row.

mod commands;
mod components;
mod installation;
mod load;
mod places;
mod reject;
mod target;

use std::sync::Arc;

use uuid::Uuid;

pub use commands::{offered_commands, owner_facts, unknown_autocomplete_request, unknown_command};
pub use components::{refused_in_store, GrantedComponent};
pub use load::{place_of_conversation, Loaded};
pub use places::{channel_conversation, readable_channels};
pub use reject::{reject, Refusal, RefusalKind, COMPONENT_USED, THREAD_UNKNOWN};
pub use target::Target;
use target::{PlaceAt, What};

use crate::domain::authz::{
    authorize, Action, Context, Decision, Denial, Facts, Mode, Reason, Resource, ResourceKind,
    Subject,
};
use crate::domain::conversation::Conversation;
use crate::domain::lease::Lease;
use crate::domain::message::Message;
use crate::domain::task::Task;
use crate::domain::Principal;
use crate::hub::{Hub, Membership, RequestContext};
use crate::rpc::RpcError;
use crate::store::{AppRecord, StoreError, StoreResult};
use crate::telemetry::names;

/// An allowed request, with what the decision loaded.
#[derive(Debug)]
pub struct Granted {
    pub loaded: Loaded,
}

/// The granted thing is not what the handler's target loads: a bug of the
/// handler, answered as the hub's fault rather than a panic.
fn mismatch() -> RpcError {
    tracing::error!("access: the target loaded another kind of resource");
    RpcError::internal()
}

impl Granted {
    pub fn membership(self) -> Result<Arc<Membership>, RpcError> {
        match self.loaded {
            Loaded::Conversation { membership, .. } | Loaded::Message { membership, .. } => {
                Ok(membership)
            }
            _ => Err(mismatch()),
        }
    }

    /// The conversation of a [`Target::conversation_row`].
    pub fn conversation(self) -> Result<Conversation, RpcError> {
        match self.loaded {
            Loaded::Conversation { row: Some(c), .. } => Ok(c),
            _ => Err(mismatch()),
        }
    }

    pub fn message(self) -> Result<(Message, Arc<Membership>), RpcError> {
        match self.loaded {
            Loaded::Message {
                message,
                membership,
            } => Ok((message, membership)),
            _ => Err(mismatch()),
        }
    }

    pub fn task(self) -> Result<Task, RpcError> {
        match self.loaded {
            Loaded::Task(task) => Ok(task),
            _ => Err(mismatch()),
        }
    }

    /// The lease, with the membership of its conversation.
    pub fn lease(self) -> Result<(Lease, Arc<Membership>), RpcError> {
        match self.loaded {
            Loaded::Lease {
                lease,
                membership: Some(membership),
            } => Ok((lease, membership)),
            _ => Err(mismatch()),
        }
    }

    pub fn app(self) -> Result<AppRecord, RpcError> {
        match self.loaded {
            Loaded::App(app) => Ok(*app),
            _ => Err(mismatch()),
        }
    }
}

/// Who asks. A session's principal is active: disabling revokes its keys,
/// which closes its sockets (ADR 0020 §1), and REST checks the key on
/// every request.
pub fn subject_of(principal: Principal) -> Subject {
    Subject::Principal {
        id: principal.id,
        kind: principal.kind,
        active: true,
    }
}

/// Who a job acts for, as the store has them now: no session vouches for
/// them (a disabled principal's sockets are closed, but its invocation's
/// job still runs), so a disabled or deleted principal is inactive.
async fn subject_now(reads: &impl load::Reads, principal: Principal) -> StoreResult<Subject> {
    let active = reads
        .principal(principal.id)
        .await?
        .is_some_and(|p| p.disabled_at.is_none());
    Ok(Subject::Principal {
        id: principal.id,
        kind: principal.kind,
        active,
    })
}

/// Decides `action` on `target` for the socket's principal; the gateway's
/// answer on refusal.
pub async fn check(
    ctx: &RequestContext,
    action: Action,
    target: Target,
) -> Result<Granted, RpcError> {
    match decide(&ctx.hub, ctx.principal(), action, &target).await {
        Ok(granted) => Ok(granted),
        Err(Refused::Store(e)) => Err(store_failure(e)),
        Err(Refused::Denied(refusal)) => Err(refusal.rpc()),
    }
}

/// The REST twin of [`check`]: the same decision, answered by the caller
/// (`http` turns a [`Refusal`] into its 404, 403 or 400).
pub async fn check_rest(
    hub: &Hub,
    principal: Principal,
    action: Action,
    target: Target,
) -> Result<Granted, Refused> {
    decide(hub, principal, action, &target).await
}

/// The operator's twin of [`check_rest`] (the admin token): the same
/// loads on the nil principal and the same decision, in which the operator
/// holds admin on every resource that exists. A missing one is the same
/// 404 a principal gets; the refusal is counted, never audited.
pub async fn check_operator(hub: &Hub, action: Action, target: Target) -> Result<Granted, Refused> {
    let subject = Subject::Operator;
    let source = load::Source::Store;
    match decide_on(hub, Uuid::nil(), &subject, action, &target, source).await? {
        (Ok(granted), _) => Ok(Granted {
            loaded: load::complete(hub, granted.loaded).await?,
        }),
        (Err(denial), _) => {
            let (kind, id) = (target.kind(), target.requested_id());
            record_denial(hub, &subject, action, kind, id, denial.reason);
            Err(Refused::Denied(reject(&target, action, denial)))
        }
    }
}

/// A job's re-check of what a request was granted (ADR 0032 §3): the same
/// loads and decision on the rights of this moment, in Filter mode, so a
/// denial is counted and never audited (the principal made no request
/// now). The subject is read as it stands now ([`subject_now`]). True when
/// allowed.
pub async fn recheck(
    hub: &Hub,
    principal: Principal,
    action: Action,
    target: Target,
) -> Result<bool, StoreError> {
    let subject = subject_now(hub, principal).await?;
    Ok(
        match decide_with(hub, principal.id, &subject, action, &target).await? {
            Outcome::Allowed { stale, .. } => {
                if let Some(id) = stale {
                    hub.memberships.invalidate(id);
                }
                true
            }
            Outcome::Denied(denial) => {
                count(action, denial.reason, Mode::Filter);
                false
            }
        },
    )
}

/// Why [`check_rest`] did not grant.
#[derive(Debug)]
pub enum Refused {
    Denied(Refusal),
    /// The hub's fault: answered as Internal.
    Store(StoreError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Self {
        Refused::Store(e)
    }
}

async fn decide(
    hub: &Hub,
    principal: Principal,
    action: Action,
    target: &Target,
) -> Result<Granted, Refused> {
    let subject = subject_of(principal);
    match decide_with(hub, principal.id, &subject, action, target).await? {
        Outcome::Allowed { granted, stale } => {
            if let Some(id) = stale {
                hub.memberships.invalidate(id);
            }
            Ok(granted)
        }
        Outcome::Denied(denial) => {
            record_denial(
                hub,
                &subject,
                action,
                target.kind(),
                target.requested_id(),
                denial.reason,
            );
            Err(Refused::Denied(reject(target, action, denial)))
        }
    }
}

/// A decision before its side effects. Returned once per request and
/// unpacked at once: boxing the grant would cost the send path an
/// allocation for nothing.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    /// `stale`: a cached entry that refused what the store allows.
    Allowed {
        granted: Granted,
        stale: Option<Uuid>,
    },
    Denied(Denial),
}

/// The decision on `reads`, with every read it makes: the unit tests run
/// it on a fake that counts statements. A denial decided on a cache hit
/// (a membership, or an app subject's installation) is decided again on
/// the store (the entry may have missed an invalidation); one decided on
/// store reads only is not, so a hidden id costs what a missing one costs,
/// cached or not.
async fn decide_with(
    reads: &impl load::Reads,
    me: Uuid,
    subject: &Subject,
    action: Action,
    target: &Target,
) -> Result<Outcome, StoreError> {
    let first = decide_on(reads, me, subject, action, target, load::Source::Cache).await?;
    match first {
        (Ok(granted), _) => return allowed(reads, granted, None).await,
        (Err(denial), true) => return Ok(Outcome::Denied(denial)),
        (Err(_), false) => {}
    };
    match decide_on(reads, me, subject, action, target, load::Source::Store).await? {
        (Ok(granted), _) => allowed(reads, granted, target.cached_conversation()).await,
        (Err(fresh), _) => Ok(Outcome::Denied(fresh)),
    }
}

async fn allowed(
    reads: &impl load::Reads,
    granted: Granted,
    stale: Option<Uuid>,
) -> Result<Outcome, StoreError> {
    let granted = Granted {
        loaded: load::complete(reads, granted.loaded).await?,
    };
    Ok(Outcome::Allowed { granted, stale })
}

/// One pass: the decision, and whether it was made on store reads only.
async fn decide_on(
    reads: &impl load::Reads,
    me: Uuid,
    subject: &Subject,
    action: Action,
    target: &Target,
    source: load::Source,
) -> Result<(Result<Granted, Denial>, bool), StoreError> {
    let installation = match installation::app_of(subject) {
        Some(app_id) => Some((app_id, installation::read(reads, app_id).await?)),
        None => None,
    };
    if let Some(denial) = installation
        .as_ref()
        .and_then(|(_, read)| installation::refused(subject, action, read))
    {
        return Ok((Err(denial), true));
    }
    let mut loading = match target.what {
        What::Place(at) => places::load(reads, me, target, at, source).await?,
        What::Command { id, conversation } => {
            commands::load(reads, me, target, id, conversation, source).await?
        }
        What::Component { message, component } => {
            components::component(reads, me, target, message, component).await?
        }
        What::Interaction(id) => components::interaction(reads, target, id).await?,
        _ => load::load(reads, me, target, source).await?,
    };
    loading.facts.installation = installation.as_ref().and_then(|(_, read)| read.facts);
    let mut ctx = Context {
        mode: Mode::Request,
        facts: loading.facts,
    };
    let mut decision = authorize(subject, action, &loading.resource, &ctx);
    if let (Decision::Deny(denial), Some((app_id, read))) = (&decision, &installation) {
        if let Some(fresh) = installation::recheck_scope(reads, *app_id, read, denial).await? {
            ctx.facts.installation = fresh;
            decision = authorize(subject, action, &loading.resource, &ctx);
        }
    }
    let decision = match decision {
        Decision::Allow => Ok(Granted {
            loaded: loading.loaded,
        }),
        Decision::Deny(denial) => Err(denial),
    };
    Ok((decision, loading.from_store))
}

/// Filter mode: keeps the rows of a list the principal may see under
/// `action`, drops the rest silently (counted, never audited). The list's
/// SQL is the index; this is the judge. An app subject's installation is
/// read once for the whole list (an inactive one keeps nothing).
pub async fn filter<T>(
    hub: &Hub,
    principal: Principal,
    action: Action,
    rows: Vec<T>,
    judge: impl Fn(&T) -> (Resource, Facts),
) -> Result<Vec<T>, StoreError> {
    filter_on(hub, principal, action, rows, judge).await
}

async fn filter_on<T>(
    reads: &impl load::Reads,
    principal: Principal,
    action: Action,
    rows: Vec<T>,
    judge: impl Fn(&T) -> (Resource, Facts),
) -> Result<Vec<T>, StoreError> {
    let subject = subject_of(principal);
    let installation = match installation::app_of(&subject) {
        Some(app_id) => installation::read(reads, app_id).await?.facts,
        None => None,
    };
    Ok(rows
        .into_iter()
        .filter(|row| {
            let (resource, facts) = judge(row);
            let ctx = Context {
                mode: Mode::Filter,
                facts: Facts {
                    installation,
                    ..facts
                },
            };
            match authorize(&subject, action, &resource, &ctx) {
                Decision::Allow => true,
                Decision::Deny(denial) => {
                    count(action, denial.reason, Mode::Filter);
                    false
                }
            }
        })
        .collect())
}

/// Where every Request-mode denial goes, missing and hidden targets alike:
/// the metric and the audit's `DenialLog` (ADR 0020 §4). No id reaches a
/// label or a log line; the record holds closed names and ids only. The
/// operator is no principal and has no audit actor: its refusals are
/// counted only.
pub fn record_denial(
    hub: &Hub,
    subject: &Subject,
    action: Action,
    resource_kind: ResourceKind,
    requested_id: Uuid,
    reason: Reason,
) {
    count(action, reason, Mode::Request);
    if let Subject::Principal { id, kind, .. } = *subject {
        hub.denials.record(crate::store::DenialRecord {
            actor_id: id,
            actor_kind: kind,
            action,
            reason,
            resource_kind,
            resource_id: requested_id,
        });
    }
}

fn count(action: Action, reason: Reason, mode: Mode) {
    let mode = match mode {
        Mode::Request => "request",
        Mode::Filter => "filter",
    };
    metrics::counter!(
        names::AUTHZ_DENIALS,
        "action" => action.as_str(),
        "reason" => reason.as_str(),
        "mode" => mode
    )
    .increment(1);
}

fn store_failure(e: StoreError) -> RpcError {
    tracing::error!(error = %e, "store failure");
    RpcError::internal()
}
