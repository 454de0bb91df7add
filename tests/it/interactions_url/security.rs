//! Seed TestInteractionsURLSecurity: a private address is refused before
//! any connection; a stored URL whose host the operator has since taken
//! off the allowlist gets nothing, even once verified (the allowlist of
//! the moment is checked before the egress client). The override only
//! narrows the allowlist (ADR 0012), so "off the allowlist but on the
//! override" is refused at startup already (`config` tests).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use super::{both, jobs_done, script, setup, setup_with, url_lines, wired, Setup, Tracker};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{expect, grant, on_channel, principal};
use crate::support::TestHub;

both!(
    a_private_address_is_refused_before_connecting,
    a_host_off_the_allowlist_is_refused_even_once_verified,
    a_right_lost_before_the_job_sends_nothing,
    a_disabled_actor_gets_nothing_sent,
    an_installation_suspended_after_the_press_sends_nothing,
);

async fn a_private_address_is_refused_before_connecting(options: Options) {
    let s = setup_with(options, false).await;
    let hub = s.hub();
    let (t, state) = s.checked_tracker(&script("good", "reply"), 1).await;
    assert_eq!(state["state"], "unverified", "{state}");
    assert_eq!(state["reason"], "blocked", "{state}");
    assert_eq!(s.fake.connections(), 0, "refused before connecting");
    let blocked = "purpose=\"interactions\",reason=\"private_address\"";
    assert!(
        hub.metric("switchboard_egress_blocked_total", blocked)
            .await
            >= 1.0
    );
    assert!(s.fake.received_on(&t.path).is_empty());
}

async fn a_host_off_the_allowlist_is_refused_even_once_verified(options: Options) {
    let mut s = setup(options).await;
    let (t, state) = s.checked_tracker(&script("good", "reply"), 1).await;
    assert_eq!(state["state"], "verified");
    let card = s.card(&t).await;
    s.w.hub.signal(libc::SIGTERM);
    s.w.hub.wait_exit(Duration::from_secs(20)).await;
    // The operator allows another port only (and admits that one's private
    // address): the fake's host and port are off the allowlist now.
    let options = Options {
        database_url: s.database_url.clone(),
        ..TestHub::fast_options()
    };
    let ca = s.root.path().join("ca.pem");
    let other = format!("localhost:{}", s.fake.port().wrapping_add(1).max(1));
    s.w.hub = TestHub::start_with(wired(options, (&s.fake, &ca, &s.data), &other, true)).await;
    let pressed = s.press(&card).await;
    jobs_done(s.hub(), "app_interaction_dispatch", 1).await;
    assert_eq!(
        s.interaction(&pressed["interactionId"]).await,
        ("failed".to_string(), Some("blocked".to_string()))
    );
    assert_eq!(
        s.fake.received_on(&t.path).len(),
        2,
        "only the check's requests"
    );
    // Refused by the egress client's own rules, before any key is read,
    // and counted as the egress client counts every refusal.
    let blocked = "purpose=\"interactions\",reason=\"not_allowed\"";
    assert_eq!(
        s.hub()
            .metric("switchboard_egress_blocked_total", blocked)
            .await,
        1.0
    );
    let lines = url_lines(s.hub());
    assert!(lines.iter().any(|l| l.contains("blocked")), "{lines:?}");
    assert!(lines.iter().all(|l| !l.contains("/app/")), "{lines:?}");
}

/// The rights of the moment decide (ADR 0032 §3): Sam invokes while he
/// may, loses write before the job runs, and the app gets nothing; the
/// re-check's denial is counted in Filter mode and never audited.
async fn a_right_lost_before_the_job_sends_nothing(options: Options) {
    let mut s = held(options).await;
    let t = verified_tracker(&s).await;
    let alex = s.w.alex.key.clone();
    let sam = s.w.sam.clone();
    let given = grant(
        s.hub(),
        &alex,
        principal(sam.id),
        on_channel(s.w.general),
        "write",
    )
    .await;
    let invoke = sam_invokes(&s, &t).await;
    let revoke = format!("/api/v1/grants/{}", given["grantId"].as_str().unwrap());
    crate::support::world::call(s.hub(), Method::DELETE, &revoke, &alex, None).await;
    restart(&mut s).await;
    jobs_done(s.hub(), "app_command_dispatch", 1).await;
    assert_eq!(delivered(&s, &t, "command", "denied").await, 1.0);
    assert_invocation_never_sent(&s, &t);
    // Since the restart, the job's re-check is the only Filter decision.
    let filter = "mode=\"filter\"";
    assert_eq!(
        s.hub()
            .metric("switchboard_authz_denials_total", filter)
            .await,
        1.0
    );
    // Sam asks again himself: that denial is a request's, audited. It is
    // the only one in the audit: the job's was not.
    let body = json!({"conversationId": s.w.general, "options": {"title": "again"}});
    let again =
        crate::support::world::call(s.hub(), Method::POST, &invoke, &sam.key, Some(body)).await;
    assert!(again.status == 404 || again.status == 403, "{}", again.body);
    let records = audited(s.hub(), sam.id).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["action"], "command.invoke");
    assert_eq!(records[0]["count"], 1, "the job's denial is not audited");
}

/// The actor is read as the store has them when the job runs: Sam, still
/// granted write, is disabled between his invoke and its job, and the app
/// gets nothing (`denied`, `principal_inactive`).
async fn a_disabled_actor_gets_nothing_sent(options: Options) {
    let mut s = held(options).await;
    let t = verified_tracker(&s).await;
    let alex = s.w.alex.key.clone();
    let sam = s.w.sam.clone();
    grant(
        s.hub(),
        &alex,
        principal(sam.id),
        on_channel(s.w.general),
        "write",
    )
    .await;
    sam_invokes(&s, &t).await;
    let disable = format!("/api/v1/people/{}/disable", sam.id);
    expect(s.hub(), Method::POST, &disable, ADMIN_TOKEN, None, 204).await;
    restart(&mut s).await;
    jobs_done(s.hub(), "app_command_dispatch", 1).await;
    assert_eq!(delivered(&s, &t, "command", "denied").await, 1.0);
    assert_invocation_never_sent(&s, &t);
    let inactive = "action=\"command.invoke\",reason=\"principal_inactive\",mode=\"filter\"";
    assert_eq!(
        s.hub()
            .metric("switchboard_authz_denials_total", inactive)
            .await,
        1.0
    );
}

/// The app's installation is suspended between the press and the job's
/// request: no request, the interaction `failed` `app_inactive`, the
/// delivery counted `inactive`.
async fn an_installation_suspended_after_the_press_sends_nothing(options: Options) {
    let mut s = held(options).await;
    let t = verified_tracker(&s).await;
    let card = s.card(&t).await;
    let pressed = s.press(&card).await;
    let suspend = format!("/api/v1/apps/{}/installation/suspend", t.app.id);
    expect(s.hub(), Method::POST, &suspend, ADMIN_TOKEN, None, 200).await;
    restart(&mut s).await;
    jobs_done(s.hub(), "app_interaction_dispatch", 1).await;
    assert_eq!(
        s.interaction(&pressed["interactionId"]).await,
        ("failed".to_string(), Some("app_inactive".to_string()))
    );
    assert_eq!(delivered(&s, &t, "interaction", "inactive").await, 1.0);
    assert_never_sent(&s, &t, "app/interaction/created");
}

/// A setup whose runner is held off by a long poll interval (its one early
/// tick comes before any job exists): the jobs wait for [`restart`].
async fn held(options: Options) -> Setup {
    setup(options.env("SWITCHBOARD_JOBS__POLL_INTERVAL_MS", 600_000)).await
}

/// Tracker, verified through the REST route (the runner is held).
async fn verified_tracker(s: &Setup) -> Tracker {
    let t = s.tracker(&script("good", "reply")).await;
    let path = format!("/api/v1/apps/{}/interactions-url/verify", t.app.id);
    let verified = expect(s.hub(), Method::POST, &path, &t.app.key, None, 200).await;
    assert_eq!(verified["state"], "verified", "{verified}");
    t
}

/// Sam runs `/ticket` in general: the invoke's path.
async fn sam_invokes(s: &Setup, t: &Tracker) -> String {
    let command = s.ticket(t).await;
    let invoke = format!("/api/v1/commands/{command}/invocations");
    let body = json!({"conversationId": s.w.general, "options": {"title": "too late"}});
    expect(
        s.hub(),
        Method::POST,
        &invoke,
        &s.w.sam.key,
        Some(body),
        202,
    )
    .await;
    invoke
}

/// Stops the hub and starts it again with the normal poll interval: the
/// waiting jobs run.
async fn restart(s: &mut Setup) {
    s.w.hub.signal(libc::SIGTERM);
    s.w.hub.wait_exit(Duration::from_secs(20)).await;
    s.w.hub = super::failures::restart(s).await;
}

async fn delivered(s: &Setup, t: &Tracker, kind: &str, reason: &str) -> f64 {
    let filter = format!(
        "app=\"{}\",kind=\"{kind}\",outcome=\"not_sent\",reason=\"{reason}\"",
        t.app.id
    );
    s.hub()
        .metric("switchboard_interaction_deliveries_total", &filter)
        .await
}

/// No request of `event_type` reached the app: only checks did (the
/// registration's own job runs after the restart too).
fn assert_never_sent(s: &Setup, t: &Tracker, event_type: &str) {
    let sent = s.fake.received_on(&t.path);
    for r in &sent {
        let event: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            event["type"], "app/interactions_url/ping",
            "{event_type} was sent"
        );
    }
}

fn assert_invocation_never_sent(s: &Setup, t: &Tracker) {
    assert_never_sent(s, t, "app/command/invoked");
}

/// The audit's denial records of `actor`, once at least one is flushed
/// (`audit.flush_interval_ms`), by a deadline.
async fn audited(hub: &TestHub, actor: uuid::Uuid) -> Vec<serde_json::Value> {
    let path = format!("/api/v1/audit?actorId={actor}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut pause = Duration::from_millis(5);
    loop {
        let page = expect(hub, Method::GET, &path, ADMIN_TOKEN, None, 200).await;
        let records = page["records"].as_array().cloned().unwrap_or_default();
        if !records.is_empty() {
            return records;
        }
        assert!(Instant::now() < deadline, "no denial was audited: {page}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}
