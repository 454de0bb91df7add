//! Seed TestInteractionsURLSecurity: a private address is refused before
//! any connection; a stored URL whose host the operator has since taken
//! off the allowlist gets nothing, even once verified (the allowlist of
//! the moment is checked before the egress client). The override only
//! narrows the allowlist (ADR 0012), so "off the allowlist but on the
//! override" is refused at startup already (`config` tests).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{both, jobs_done, script, setup, setup_with, url_lines, wired};
use crate::support::hub::Options;
use crate::support::world::{expect, grant, on_channel, principal};
use crate::support::TestHub;

both!(
    a_private_address_is_refused_before_connecting,
    a_host_off_the_allowlist_is_refused_even_once_verified,
    a_right_lost_before_the_job_sends_nothing,
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
    let lines = url_lines(s.hub());
    assert!(lines.iter().any(|l| l.contains("blocked")), "{lines:?}");
    assert!(lines.iter().all(|l| !l.contains("/app/")), "{lines:?}");
}

/// The rights of the moment decide (ADR 0032 §3): Sam invokes while he
/// may, loses write before the job runs, and the app gets nothing. The
/// runner is held off by a long poll interval (its one early tick comes
/// before any job exists); the URL is verified through the REST route;
/// the restarted hub runs the waiting jobs.
async fn a_right_lost_before_the_job_sends_nothing(options: Options) {
    let mut s = setup(options.env("SWITCHBOARD_JOBS__POLL_INTERVAL_MS", 600_000)).await;
    let t = s.tracker(&script("good", "reply")).await;
    let path = format!("/api/v1/apps/{}/interactions-url/verify", t.app.id);
    let verified = expect(s.hub(), Method::POST, &path, &t.app.key, None, 200).await;
    assert_eq!(verified["state"], "verified", "{verified}");
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
    let command = s.ticket(&t).await;
    let invoke = format!("/api/v1/commands/{command}/invocations");
    let body = json!({"conversationId": s.w.general, "options": {"title": "too late"}});
    expect(s.hub(), Method::POST, &invoke, &sam.key, Some(body), 202).await;
    let revoke = format!("/api/v1/grants/{}", given["grantId"].as_str().unwrap());
    crate::support::world::call(s.hub(), Method::DELETE, &revoke, &alex, None).await;
    s.w.hub.signal(libc::SIGTERM);
    s.w.hub.wait_exit(Duration::from_secs(20)).await;
    s.w.hub = super::failures::restart(&s).await;
    jobs_done(s.hub(), "app_command_dispatch", 1).await;
    let denied = format!(
        "app=\"{}\",kind=\"command\",outcome=\"failed\",reason=\"denied\"",
        t.app.id
    );
    assert_eq!(
        s.hub()
            .metric("switchboard_interaction_deliveries_total", &denied)
            .await,
        1.0
    );
    let sent = s.fake.received_on(&t.path);
    assert!(
        sent.iter()
            .all(|r| !String::from_utf8_lossy(&r.body).contains("app/command/invoked")),
        "the invocation was never sent"
    );
}
