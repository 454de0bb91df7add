//! Seed TestInteractionsURLSecurity: a private address is refused before
//! any connection; a stored URL whose host the operator has since taken
//! off the allowlist gets nothing, even once verified (the allowlist of
//! the moment is checked before the egress client). The override only
//! narrows the allowlist (ADR 0012), so "off the allowlist but on the
//! override" is refused at startup already (`config` tests).

use std::time::Duration;

use super::{both, jobs_done, script, setup, setup_with, url_lines, wired};
use crate::support::hub::Options;
use crate::support::TestHub;

both!(
    a_private_address_is_refused_before_connecting,
    a_host_off_the_allowlist_is_refused_even_once_verified,
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
