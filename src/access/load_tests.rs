//! The loaders read the same things in the same order for a hidden row as
//! for a missing one, and `authorize` then gives the two one denial; and
//! the whole decision (both passes) makes as many store statements for
//! either, cached or not.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::*;
use crate::domain::authz::{authorize, Action, Context, Decision, Mode, ResourceKind, Subject};
use crate::domain::lease::LeaseState;
use crate::domain::message::Origin;
use crate::domain::task::{TaskParticipant, TaskRole, TaskState};

#[path = "load_place_tests.rs"]
mod places;

#[path = "load_cost_tests.rs"]
mod costs;

#[path = "load_channel_tests.rs"]
mod channels;

/// Rows by id, the membership cache (the ids it holds), every read asked
/// of it, by name, and the store statements those reads cost. Each read
/// costs what the real store's costs whether its row exists or not (the
/// real store's counts are checked in `tests/it/store_statements.rs`): a
/// membership read two (the conversation with its participants, the
/// channel levels), a cache hit none, every other read one.
#[derive(Default)]
struct Fake {
    memberships: HashMap<Uuid, Arc<Membership>>,
    messages: HashMap<Uuid, Message>,
    tasks: HashMap<Uuid, Task>,
    leases: HashMap<Uuid, LeaseAccess>,
    kinds: Vec<(Uuid, PrincipalKind, bool)>,
    principals: HashMap<Uuid, crate::store::PrincipalRecord>,
    spaces: HashMap<Uuid, crate::store::SpaceRecord>,
    grants: HashMap<Uuid, crate::store::GrantRecord>,
    commands: HashMap<Uuid, crate::store::CommandRecord>,
    cached: Mutex<HashSet<Uuid>>,
    /// App subjects' installations, and those the cache holds.
    installations: HashMap<Uuid, crate::domain::installation::InstallationFacts>,
    cached_installations: Mutex<HashSet<Uuid>>,
    log: Mutex<Vec<&'static str>>,
    statements: Mutex<u32>,
}

/// What reading a membership from the store costs.
const MEMBERSHIP_STATEMENTS: u32 = 3;
/// A space row, the caller's levels on a space, a grant row: one each.
const SPACE_STATEMENTS: u32 = 1;
const SPACE_LEVELS_STATEMENTS: u32 = 1;
const GRANT_STATEMENTS: u32 = 1;
/// An installation read: one statement on a miss, none on a cache hit.
const INSTALLATION_STATEMENTS: u32 = 1;

impl Fake {
    fn note(&self, read: &'static str) {
        self.cost(read, 1);
    }

    fn cost(&self, read: &'static str, statements: u32) {
        self.log.lock().unwrap().push(read);
        *self.statements.lock().unwrap() += statements;
    }

    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn take_statements(&self) -> u32 {
        std::mem::take(&mut *self.statements.lock().unwrap())
    }
}

#[async_trait]
impl Reads for Fake {
    async fn membership(&self, id: Uuid, source: Source) -> StoreResult<Fetched> {
        let found = self.memberships.get(&id).cloned();
        let hit = source == Source::Cache && self.cached.lock().unwrap().contains(&id);
        if hit {
            self.cost("membership", 0);
        } else {
            self.cost("membership", MEMBERSHIP_STATEMENTS);
            if source == Source::Cache && found.is_some() {
                self.cached.lock().unwrap().insert(id);
            }
        }
        Ok(Fetched {
            membership: found,
            from_store: !hit,
        })
    }
    async fn conversation_whole(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<(Conversation, Membership)>> {
        self.cost("conversation_whole", MEMBERSHIP_STATEMENTS);
        let found = self.memberships.get(&id);
        Ok(found.map(|m| (m.conversation_at(0), (**m).clone())))
    }
    async fn message(&self, id: Uuid) -> StoreResult<Option<Message>> {
        self.note("message");
        Ok(self.messages.get(&id).cloned())
    }
    async fn is_recipient(&self, _: Uuid, _: Uuid) -> StoreResult<bool> {
        self.note("is_recipient");
        Ok(false)
    }
    async fn task(&self, id: Uuid) -> StoreResult<Option<Task>> {
        self.note("task");
        Ok(self.tasks.get(&id).cloned())
    }
    async fn lease(&self, id: Uuid) -> StoreResult<Option<LeaseAccess>> {
        self.note("lease");
        Ok(self.leases.get(&id).cloned())
    }
    async fn app(&self, _: Uuid) -> StoreResult<Option<AppRecord>> {
        self.note("app");
        Ok(None)
    }
    async fn principal(&self, id: Uuid) -> StoreResult<Option<crate::store::PrincipalRecord>> {
        self.note("principal");
        Ok(self.principals.get(&id).cloned())
    }
    async fn space(&self, id: Uuid) -> StoreResult<Option<crate::store::SpaceRecord>> {
        self.cost("space", SPACE_STATEMENTS);
        Ok(self.spaces.get(&id).cloned())
    }
    // The levels of the caller (never a holder in these worlds): none.
    async fn space_levels(&self, _: Uuid, _: Uuid) -> StoreResult<crate::store::SpaceLevels> {
        self.cost("space_levels", SPACE_LEVELS_STATEMENTS);
        Ok(crate::store::SpaceLevels::default())
    }
    async fn grant(&self, id: Uuid) -> StoreResult<Option<crate::store::GrantRecord>> {
        self.cost("grant", GRANT_STATEMENTS);
        Ok(self.grants.get(&id).cloned())
    }
    async fn command(&self, id: Uuid) -> StoreResult<Option<crate::store::CommandRecord>> {
        self.note("command");
        Ok(self.commands.get(&id).cloned())
    }

    async fn interaction(
        &self,
        _id: Uuid,
    ) -> StoreResult<Option<crate::domain::component::Interaction>> {
        self.cost("interaction", 1);
        Ok(None)
    }
    async fn installation(
        &self,
        app_id: Uuid,
        source: Source,
    ) -> StoreResult<(Option<crate::domain::installation::InstallationFacts>, bool)> {
        let found = self.installations.get(&app_id).copied();
        let mut cached = self.cached_installations.lock().unwrap();
        let hit = source == Source::Cache && cached.contains(&app_id);
        self.cost(
            "installation",
            if hit { 0 } else { INSTALLATION_STATEMENTS },
        );
        if found.is_some() {
            cached.insert(app_id);
        }
        Ok((found, !hit))
    }
    async fn principal_kinds(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>> {
        self.note("principal_kinds");
        Ok(self
            .kinds
            .iter()
            .filter(|(id, _, _)| ids.contains(id))
            .copied()
            .collect())
    }
}

/// A world where `me` (an agent) sees nothing: a conversation of two
/// others inside a task, a message there, the task and a lease.
struct World {
    fake: Fake,
    me: Uuid,
    conversation: Uuid,
    message: Uuid,
    task: Uuid,
    lease: Uuid,
}

fn world() -> World {
    let (me, a, b, app) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let (conversation, message, task, lease) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let mut fake = Fake::default();
    fake.memberships.insert(
        conversation,
        Arc::new(Membership {
            id: conversation,
            kind: ConversationKind::Task,
            task_id: Some(task),
            participants: vec![a, b],
            people: Vec::new(),
            disabled: Vec::new(),
            name: None,
            key: None,
            created_by: app,
            created_at: String::new(),
            channel: None,
        }),
    );
    fake.messages.insert(
        message,
        Message {
            id: message,
            conversation_id: conversation,
            seq: 1,
            sender_id: a,
            origin: Origin::Agent,
            parts: vec![],
            reply_to: None,
            thread_id: None,
            created_at: String::new(),
            reply_to_interaction: None,
            card: None,
        },
    );
    let participant = |agent_id| TaskParticipant {
        agent_id,
        role: TaskRole::Invited,
    };
    fake.tasks.insert(
        task,
        Task {
            id: task,
            app_id: app,
            initiator_id: a,
            state: TaskState::Active,
            participants: vec![participant(a), participant(b)],
            failure: None,
            created_at: String::new(),
            updated_at: String::new(),
        },
    );
    fake.leases.insert(
        lease,
        LeaseAccess {
            lease: Lease {
                lease_id: lease,
                message_id: message,
                conversation_id: conversation,
                recipient_id: b,
                state: LeaseState::Granted,
                reason: None,
                expires_at: None,
                created_at: String::new(),
            },
            task_app: Some(app),
        },
    );
    fake.kinds = vec![
        (a, PrincipalKind::Agent, true),
        (me, PrincipalKind::Agent, true),
    ];
    World {
        fake,
        me,
        conversation,
        message,
        task,
        lease,
    }
}

/// Loads `hidden` and a random id's twin, checks the reads were the same
/// and the missing one is `Missing(kind)`, and returns both decisions.
async fn both(w: &World, action: Action, hidden: Target, missing: Target) -> (Decision, Decision) {
    let subject = Subject::Principal {
        id: w.me,
        kind: PrincipalKind::Agent,
        active: true,
    };
    let mut out = Vec::new();
    let mut reads = Vec::new();
    for target in [&hidden, &missing] {
        let loading = load(&w.fake, w.me, target, Source::Cache).await.unwrap();
        reads.push(w.fake.take());
        let ctx = Context {
            mode: Mode::Request,
            facts: loading.facts,
        };
        out.push((
            loading.resource.clone(),
            authorize(&subject, action, &loading.resource, &ctx),
        ));
    }
    assert!(!reads[0].is_empty());
    assert_eq!(
        reads[0], reads[1],
        "{action}: other reads for a missing row"
    );
    assert!(!matches!(out[0].0, Resource::Missing(_)), "{action}: found");
    assert_eq!(out[1].0, Resource::Missing(missing.kind()));
    (out[0].1, out[1].1)
}

fn denied(decisions: (Decision, Decision)) {
    assert!(matches!(decisions.0, Decision::Deny(_)), "{decisions:?}");
    assert_eq!(decisions.0, decisions.1);
}

#[tokio::test]
async fn a_hidden_conversation_reads_and_answers_like_a_missing_one() {
    let w = world();
    for action in [
        Action::ConversationRead,
        Action::MessageCreate,
        Action::TypingSend,
    ] {
        denied(
            both(
                &w,
                action,
                Target::conversation(w.conversation),
                Target::conversation(Uuid::new_v4()),
            )
            .await,
        );
    }
}

#[tokio::test]
async fn a_hidden_message_reads_and_answers_like_a_missing_one() {
    let w = world();
    for action in [Action::MessageRead, Action::DispatchRequest] {
        denied(
            both(
                &w,
                action,
                Target::message(w.conversation, w.message),
                Target::message(w.conversation, Uuid::new_v4()),
            )
            .await,
        );
    }
}

#[tokio::test]
async fn a_hidden_task_reads_and_answers_like_a_missing_one() {
    let w = world();
    let named = [w.me];
    denied(
        both(
            &w,
            Action::TaskRead,
            Target::task(w.task).naming(&named),
            Target::task(Uuid::new_v4()).naming(&named),
        )
        .await,
    );
}

#[tokio::test]
async fn a_hidden_lease_reads_and_answers_like_a_missing_one() {
    let w = world();
    let (hidden, missing) = both(
        &w,
        Action::DispatchComplete,
        Target::lease(w.lease),
        Target::lease(Uuid::new_v4()),
    )
    .await;
    denied((hidden, missing));
    assert!(
        matches!(hidden, Decision::Deny(d) if d.reason == crate::domain::authz::Reason::NotSelf)
    );
}

#[tokio::test]
async fn a_missing_app_is_missing_with_its_invitees_read() {
    let w = world();
    let loading = load(
        &w.fake,
        w.me,
        &Target::app(Uuid::new_v4()).naming(&[w.me]),
        Source::Cache,
    )
    .await
    .unwrap();
    assert_eq!(w.fake.take(), ["app", "principal_kinds"]);
    assert_eq!(loading.resource, Resource::Missing(ResourceKind::App));
}
