//! The console's sessions (ADR 0030, ADR 0036): the admin token, posted
//! once, is exchanged for a random 256-bit session id and a CSRF token
//! (`login` sets them in cookies). The hub keeps only their digests, in
//! the database (`store::ConsoleSessionStore`), with an idle and an
//! absolute lifetime, so every node on the database knows every session:
//! behind a load balancer a login on one node works on the others, and a
//! logout on one ends it on all.
//!
//! The digests are HMAC-SHA-256 keyed by the admin token: a database copy
//! holds nothing that checks a cookie without the token, and a new admin
//! token ends every session (its digests no longer match), as a restart
//! did when sessions were in memory.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::config::ConsoleConfig;
use crate::domain::{now_millis, Millis};
use crate::store::{ConsoleSessionRecord, DynStore, SessionPrune, StoreResult};

/// What a digest is of: the id and the CSRF token are keyed apart, so one
/// never stands in for the other.
#[derive(Clone, Copy)]
enum Secret {
    Id,
    Csrf,
}

fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Why a session is not (or no longer) usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// No cookie, an unknown id, or a logout.
    Missing,
    Idle,
    Expired,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Missing => "logged_out",
            Ended::Idle => "idle",
            Ended::Expired => "expired",
        }
    }
}

/// Why a request was not let through as the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    LoggedOut,
    Csrf,
}

/// A login's two secrets, shown once in its cookies.
pub struct Issued {
    pub id: String,
    pub csrf: String,
}

/// The console's sessions, as this node sees the shared rows.
pub struct Sessions {
    store: DynStore,
    /// The admin token's HMAC key (an empty token: the console is off and
    /// nothing is issued).
    key: Hmac<Sha256>,
    idle: Millis,
    lifetime: Millis,
    capacity: usize,
}

impl Sessions {
    pub fn new(store: DynStore, config: &ConsoleConfig, admin_token: &str) -> Sessions {
        let millis = |secs: u64| Duration::from_secs(secs).as_millis() as Millis;
        Sessions {
            store,
            key: Hmac::new_from_slice(admin_token.as_bytes()).expect("HMAC takes any key"),
            idle: millis(config.session_idle_secs),
            lifetime: millis(config.session_max_secs),
            capacity: config.max_sessions,
        }
    }

    fn digest(&self, what: Secret, secret: &str) -> Vec<u8> {
        let mut mac = self.key.clone();
        mac.update(match what {
            Secret::Id => b"console session id\0",
            Secret::Csrf => b"console csrf token\0",
        });
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    fn ended(&self, s: &ConsoleSessionRecord, now: Millis) -> Option<Ended> {
        if now - s.created_at >= self.lifetime {
            Some(Ended::Expired)
        } else if now - s.last_used_at >= self.idle {
            Some(Ended::Idle)
        } else {
            None
        }
    }

    /// A new session; past `console.max_sessions` the oldest one ends.
    pub async fn issue(&self) -> StoreResult<Issued> {
        self.issue_at(now_millis()).await
    }

    async fn issue_at(&self, now: Millis) -> StoreResult<Issued> {
        let issued = Issued {
            id: random_secret(),
            csrf: random_secret(),
        };
        let prune = SessionPrune {
            created_before: now - self.lifetime,
            used_before: now - self.idle,
            capacity: self.capacity,
        };
        self.store
            .create_console_session(
                &self.digest(Secret::Id, &issued.id),
                &self.digest(Secret::Csrf, &issued.csrf),
                now,
                prune,
            )
            .await?;
        Ok(issued)
    }

    /// Whether the session `id` is live; `touch` counts this as a use (a
    /// page load or an action; the live stream's ticks are not).
    pub async fn check(&self, id: &str, touch: bool) -> StoreResult<Result<(), Ended>> {
        self.check_at(id, touch, now_millis()).await
    }

    async fn check_at(&self, id: &str, touch: bool, now: Millis) -> StoreResult<Result<(), Ended>> {
        Ok(self.live_at(id, touch, now).await?.map(|_| ()))
    }

    /// The live session `id` (counted as a use when `touch`); one found
    /// ended is deleted.
    async fn live_at(
        &self,
        id: &str,
        touch: bool,
        now: Millis,
    ) -> StoreResult<Result<ConsoleSessionRecord, Ended>> {
        let key = self.digest(Secret::Id, id);
        let Some(session) = self.store.console_session(&key).await? else {
            return Ok(Err(Ended::Missing));
        };
        if let Some(ended) = self.ended(&session, now) {
            self.store.end_console_session(&key).await?;
            return Ok(Err(ended));
        }
        if touch {
            self.store.touch_console_session(&key, now).await?;
        }
        Ok(Ok(session))
    }

    /// Whether the session `id` may act: live, and, for an action, carrying
    /// its CSRF token (compared in constant time). Only a request that
    /// passes counts as a use, so a forged action cannot keep an idle
    /// session alive.
    pub async fn admit(&self, id: &str, csrf: Option<&str>) -> StoreResult<Result<(), Refused>> {
        self.admit_at(id, csrf, now_millis()).await
    }

    async fn admit_at(
        &self,
        id: &str,
        csrf: Option<&str>,
        now: Millis,
    ) -> StoreResult<Result<(), Refused>> {
        let Ok(session) = self.live_at(id, false, now).await? else {
            return Ok(Err(Refused::LoggedOut));
        };
        if let Some(presented) = csrf {
            let matches: bool = session
                .csrf_digest
                .ct_eq(&self.digest(Secret::Csrf, presented))
                .into();
            if presented.is_empty() || !matches {
                return Ok(Err(Refused::Csrf));
            }
        }
        self.store
            .touch_console_session(&self.digest(Secret::Id, id), now)
            .await?;
        Ok(Ok(()))
    }

    /// Ends the session `id` on every node.
    pub async fn end(&self, id: &str) -> StoreResult<()> {
        self.store
            .end_console_session(&self.digest(Secret::Id, id))
            .await
    }

    /// When the session `id` ends at the latest, in seconds from now.
    pub async fn remaining_secs(&self, id: &str) -> StoreResult<Option<u64>> {
        let key = self.digest(Secret::Id, id);
        let Some(s) = self.store.console_session(&key).await? else {
            return Ok(None);
        };
        let left = (s.created_at + self.lifetime - now_millis()).max(0);
        Ok(Some(left as u64 / 1_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        sessions: Sessions,
    }

    async fn sessions(idle: u64, max: u64, capacity: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config::default();
        config.server.data_dir = dir.path().to_path_buf();
        let store = crate::store::open(&config).await.unwrap();
        let console = ConsoleConfig {
            session_idle_secs: idle,
            session_max_secs: max,
            max_sessions: capacity,
            ..ConsoleConfig::default()
        };
        Fixture {
            _dir: dir,
            sessions: Sessions::new(store, &console, "operator-token"),
        }
    }

    /// `secs` seconds from now, in the store's milliseconds.
    fn later(secs: i64) -> Millis {
        now_millis() + secs * 1_000
    }

    #[tokio::test]
    async fn a_session_is_found_by_its_id_only_and_ends_on_logout() {
        let f = sessions(60, 600, 4).await;
        let s = &f.sessions;
        let issued = s.issue().await.unwrap();
        assert_eq!(s.check(&issued.id, true).await.unwrap(), Ok(()));
        assert_eq!(
            s.check(&issued.csrf, true).await.unwrap(),
            Err(Ended::Missing)
        );
        assert_eq!(
            s.admit(&issued.id, Some(&issued.csrf)).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            s.admit(&issued.id, Some(&issued.id)).await.unwrap(),
            Err(Refused::Csrf)
        );
        s.end(&issued.id).await.unwrap();
        assert_eq!(
            s.check(&issued.id, true).await.unwrap(),
            Err(Ended::Missing)
        );
        assert_eq!(
            s.admit(&issued.id, Some(&issued.csrf)).await.unwrap(),
            Err(Refused::LoggedOut)
        );
    }

    #[tokio::test]
    async fn nothing_but_digests_is_stored_and_a_new_admin_token_ends_every_session() {
        let f = sessions(60, 600, 4).await;
        let issued = f.sessions.issue().await.unwrap();
        let key = f.sessions.digest(Secret::Id, &issued.id);
        let row = f
            .sessions
            .store
            .console_session(&key)
            .await
            .unwrap()
            .unwrap();
        assert_ne!(row.csrf_digest, issued.csrf.as_bytes());
        assert_ne!(key, issued.id.as_bytes());
        let rotated = Sessions::new(
            f.sessions.store.clone(),
            &ConsoleConfig::default(),
            "a-new-operator-token",
        );
        assert_eq!(
            rotated.check(&issued.id, true).await.unwrap(),
            Err(Ended::Missing)
        );
    }

    #[tokio::test]
    async fn past_capacity_the_oldest_session_ends() {
        let f = sessions(60, 600, 2).await;
        let s = &f.sessions;
        let first = s.issue_at(later(0)).await.unwrap();
        let second = s.issue_at(later(1)).await.unwrap();
        let third = s.issue_at(later(2)).await.unwrap();
        let at = later(3);
        assert_eq!(
            s.check_at(&first.id, false, at).await.unwrap(),
            Err(Ended::Missing)
        );
        assert_eq!(s.check_at(&second.id, false, at).await.unwrap(), Ok(()));
        assert_eq!(s.check_at(&third.id, false, at).await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn idle_and_absolute_lifetimes_end_a_session() {
        let f = sessions(60, 600, 4).await;
        let s = &f.sessions;
        let issued = s.issue().await.unwrap();
        assert_eq!(
            s.check_at(&issued.id, true, later(59)).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            s.check_at(&issued.id, true, later(118)).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            s.check_at(&issued.id, true, later(180)).await.unwrap(),
            Err(Ended::Idle)
        );
        // Found ended, it was deleted: it stays ended whatever the time.
        assert_eq!(
            s.check_at(&issued.id, true, later(1)).await.unwrap(),
            Err(Ended::Missing)
        );
        let issued = s.issue().await.unwrap();
        for secs in [50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550] {
            assert_eq!(
                s.check_at(&issued.id, true, later(secs)).await.unwrap(),
                Ok(())
            );
        }
        assert_eq!(
            s.check_at(&issued.id, true, later(601)).await.unwrap(),
            Err(Ended::Expired)
        );
    }

    #[tokio::test]
    async fn a_refused_action_does_not_keep_a_session_alive() {
        let f = sessions(60, 600, 4).await;
        let s = &f.sessions;
        let issued = s.issue().await.unwrap();
        assert_eq!(
            s.admit_at(&issued.id, Some("forged"), later(50))
                .await
                .unwrap(),
            Err(Refused::Csrf)
        );
        assert_eq!(
            s.admit_at(&issued.id, Some(""), later(55)).await.unwrap(),
            Err(Refused::Csrf)
        );
        assert_eq!(
            s.check_at(&issued.id, false, later(61)).await.unwrap(),
            Err(Ended::Idle),
            "the refused actions were not uses"
        );
        let issued = s.issue().await.unwrap();
        assert_eq!(
            s.admit_at(&issued.id, Some(&issued.csrf), later(50))
                .await
                .unwrap(),
            Ok(())
        );
        assert_eq!(
            s.admit_at(&issued.id, None, later(100)).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            s.check_at(&issued.id, false, later(150)).await.unwrap(),
            Ok(())
        );
        assert_eq!(
            s.admit_at("unknown", Some(&issued.csrf), later(1))
                .await
                .unwrap(),
            Err(Refused::LoggedOut)
        );
    }
}
