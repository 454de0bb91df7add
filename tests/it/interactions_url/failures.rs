//! Part 2, the answers that fail (seed TestAppInteractionNoAnswer): a
//! delay, a 500, a 302 (never followed), an oversized and an unparsable
//! answer each get exactly one request and leave the interaction `failed`
//! with their reason, logged without path or body. A hub killed during a
//! request sends it again after its restart, with the same `webhook-id`.

use std::time::Duration;

use super::{both, jobs_done, script, setup, url_lines, wired, Setup};
use crate::support::hub::Options;
use crate::support::TestHub;

both!(
    an_answer_that_is_no_answer_fails_after_one_request,
    a_rerun_after_a_crash_repeats_the_webhook_id,
    a_command_rerun_after_a_crash_repeats_the_webhook_id_once,
);

async fn an_answer_that_is_no_answer_fails_after_one_request(options: Options) {
    let s = setup(options).await;
    let hub = s.hub();
    let cases = [
        ("delay", "timeout"),
        ("error", "http_status"),
        ("redirect", "redirect"),
        ("big", "too_large"),
        ("invalid-json", "invalid_reply"),
    ];
    for (n, (answer, reason)) in cases.into_iter().enumerate() {
        let (t, state) = s.checked_tracker(&script("good", answer), n + 1).await;
        assert_eq!(state["state"], "verified", "{answer}: {state}");
        let card = s.card(&t).await;
        let pressed = s.press(&card).await;
        jobs_done(hub, "app_interaction_dispatch", n + 1).await;
        assert_eq!(
            s.interaction(&pressed["interactionId"]).await,
            ("failed".to_string(), Some(reason.to_string())),
            "{answer}"
        );
        assert_eq!(
            s.fake.received_on(&t.path).len(),
            3,
            "{answer}: the check's two and one"
        );
        let counted = format!(
            "app=\"{}\",kind=\"interaction\",outcome=\"failed\",reason=\"{reason}\"",
            t.app.id
        );
        assert_eq!(
            hub.metric("switchboard_interaction_deliveries_total", &counted)
                .await,
            1.0
        );
        let line = url_lines(hub)
            .into_iter()
            .find(|l| l.contains(&t.app.id.to_string()) && !l.contains("verification"))
            .unwrap_or_else(|| panic!("{answer}: no log line"));
        assert!(line.contains(reason), "{line}");
        assert!(!line.contains("/app/"), "{line}");
    }
    assert!(
        s.fake.received_on("/ok").is_empty(),
        "the redirect was not followed"
    );
    let log = hub.log();
    assert!(!log.contains("/app/good"), "no URL path in the log");
    assert!(
        !log.contains("scripted") && !log.contains("not json"),
        "no answer body in the log"
    );
}

async fn a_rerun_after_a_crash_repeats_the_webhook_id(options: Options) {
    let mut s = setup(options).await;
    let (t, _) = s.checked_tracker(&script("good", "delay"), 1).await;
    let card = s.card(&t).await;
    let pressed = s.press(&card).await;
    let first = s.fake.wait_on(&t.path, 3).await[2].clone();
    s.w.hub.signal(libc::SIGKILL);
    s.w.hub.wait_exit(Duration::from_secs(10)).await;
    s.w.hub = restart(&s).await;
    let again = s.fake.wait_on(&t.path, 4).await[3].clone();
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(again.body, first.body, "the same stored event");
    jobs_done(s.hub(), "app_interaction_dispatch", 1).await;
    assert_eq!(
        s.interaction(&pressed["interactionId"]).await,
        ("failed".to_string(), Some("timeout".to_string()))
    );
    assert_eq!(s.fake.received_on(&t.path).len(), 4, "no third request");
}

/// A command invocation's job, killed during its request (after the
/// invoke's commit): the restarted hub repeats the request with the same
/// `webhook-id` and body. Killed again during the repeat, the next run
/// sends nothing: the app sees at most the first request and one repeat
/// (ADR 0032 §3), and the delivery ends `unrecorded`.
async fn a_command_rerun_after_a_crash_repeats_the_webhook_id_once(options: Options) {
    let mut s = setup(options).await;
    let (t, state) = s.checked_tracker(&script("good", "delay"), 1).await;
    assert_eq!(state["state"], "verified", "{state}");
    s.invoke(&t, "filed twice at most").await;
    let first = s.fake.wait_on(&t.path, 3).await[2].clone();
    let event: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(event["type"], "app/command/invoked");
    assert_eq!(first.header("webhook-id"), event["id"].as_str());
    s.w.hub.signal(libc::SIGKILL);
    s.w.hub.wait_exit(Duration::from_secs(10)).await;
    s.w.hub = restart(&s).await;
    let again = s.fake.wait_on(&t.path, 4).await[3].clone();
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(again.body, first.body, "the same stored event");
    s.w.hub.signal(libc::SIGKILL);
    s.w.hub.wait_exit(Duration::from_secs(10)).await;
    s.w.hub = restart(&s).await;
    jobs_done(s.hub(), "app_command_dispatch", 1).await;
    let unrecorded = format!(
        "app=\"{}\",kind=\"command\",outcome=\"not_sent\",reason=\"unrecorded\"",
        t.app.id
    );
    assert_eq!(
        s.hub()
            .metric("switchboard_interaction_deliveries_total", &unrecorded)
            .await,
        1.0
    );
    assert_eq!(
        s.fake.received_on(&t.path).len(),
        4,
        "the check's two, the request and one repeat"
    );
}

/// The same hub again, on the same database.
pub(super) async fn restart(s: &Setup) -> TestHub {
    let options = Options {
        database_url: s.database_url.clone(),
        ..TestHub::fast_options()
    };
    let ca = s.root.path().join("ca.pem");
    let allow = format!("localhost:{}", s.fake.port());
    TestHub::start_with(wired(options, (&s.fake, &ca, &s.data), &allow, true)).await
}
