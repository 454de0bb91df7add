//! Part 1: a URL is verified only by an app that echoes the hub's signed
//! ping and refuses a request with a bad signature; until then nothing is
//! delivered to it; an upgrade that changes it resets it; the check runs
//! again on demand (REST, CLI).

use reqwest::Method;
use serde_json::json;

use super::{assert_signed_and_bare, both, jobs_done, script, setup, url_state};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::expect;

both!(
    a_url_is_verified_only_by_an_app_that_checks_signatures,
    an_upgrade_that_changes_the_url_resets_it,
    a_stale_check_never_overwrites_a_newer_one,
    the_order_of_the_two_requests_is_drawn_per_check,
);

/// The CLI as a child process, awaited: the fake app answers on this
/// test's runtime meanwhile.
async fn verify_url_cli(id: &str, base: &str) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["app", "verify-url", id, "--hub", base])
        .env("SWITCHBOARD_ADMIN__TOKEN", ADMIN_TOKEN)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn a_url_is_verified_only_by_an_app_that_checks_signatures(options: Options) {
    let s = setup(options).await;
    let hub = s.hub();
    let good = s.tracker(&script("good", "reply")).await;
    assert_eq!(
        good.registered["interactionsUrl"],
        json!({"state": "unverified"}),
        "the registration answer says so: {}",
        good.registered
    );
    jobs_done(hub, "app_url_verify", 1).await;
    let state = url_state(hub, good.app.id).await;
    assert_eq!(state["state"], "verified", "{state}");
    assert!(
        state["checkedAt"].is_string() && state.get("reason").is_none(),
        "{state}"
    );
    let pings = s.fake.received_on(&good.path);
    assert_eq!(pings.len(), 2, "a ping and one with a bad signature");
    let signed: Vec<_> = pings.iter().filter(|p| p.verified.is_ok()).collect();
    assert_eq!(signed.len(), 1, "the other is signed by no published key");
    assert_signed_and_bare(&pings);
    let ping: serde_json::Value = serde_json::from_slice(&signed[0].body).unwrap();
    assert_eq!(ping["type"], "app/interactions_url/ping");
    assert_eq!(signed[0].header("webhook-id"), ping["id"].as_str());
    assert!(ping["syncEpoch"].is_string() && ping["payload"]["nonce"].is_string());

    // Either request may come first; the first failure ends the check.
    let (wrong, state) = s.checked_tracker(&script("wrong-echo", "reply"), 2).await;
    assert_eq!(state["state"], "unverified", "{state}");
    assert_eq!(state["reason"], "nonce_mismatch", "{state}");
    let sent = s.fake.received_on(&wrong.path);
    assert!(
        sent.last().is_some_and(|r| r.verified.is_ok()) && sent.len() <= 2,
        "the check ends at the wrong echo"
    );
    let (lax, state) = s.checked_tracker(&script("no-check", "reply"), 3).await;
    assert_eq!(state["state"], "unverified", "{state}");
    assert_eq!(state["reason"], "signature_not_checked", "{state}");
    let sent = s.fake.received_on(&lax.path);
    assert!(
        sent.last().is_some_and(|r| r.verified.is_err()) && sent.len() <= 2,
        "the check ends at the accepted bad signature"
    );
    let lax_checked = sent.len();

    // Nothing reaches an unverified URL: neither an invocation nor a press.
    s.invoke(&lax, "never sent").await;
    jobs_done(hub, "app_command_dispatch", 1).await;
    let card = s.card(&lax).await;
    let pressed = s.press(&card).await;
    jobs_done(hub, "app_interaction_dispatch", 1).await;
    assert_eq!(
        s.fake.received_on(&lax.path).len(),
        lax_checked,
        "only the check's requests"
    );
    assert_eq!(
        s.interaction(&pressed["interactionId"]).await,
        ("failed".to_string(), Some("url_unverified".to_string()))
    );

    // The check again, by the app itself over REST and by the operator's CLI.
    let path = format!("/api/v1/apps/{}/interactions-url/verify", good.app.id);
    let again = expect(hub, Method::POST, &path, &good.app.key, None, 200).await;
    assert_eq!(again["state"], "verified", "{again}");
    assert_eq!(s.fake.received_on(&good.path).len(), 4);
    let foreign = expect(hub, Method::POST, &path, &lax.app.key, None, 404).await;
    assert_eq!(foreign["error"]["code"], "not_found", "{foreign}");
    let (code, out) = verify_url_cli(&good.app.id.to_string(), &hub.base).await;
    assert_eq!((code, out.trim()), (Some(0), "verified"));
    let (code, out) = verify_url_cli(&wrong.app.id.to_string(), &hub.base).await;
    assert_eq!((code, out.trim()), (Some(2), "unverified: nonce_mismatch"));
    let failed = format!(
        "app=\"{}\",kind=\"verification\",outcome=\"failed\",reason=\"nonce_mismatch\"",
        wrong.app.id
    );
    assert_eq!(
        hub.metric("switchboard_interaction_deliveries_total", &failed)
            .await,
        2.0
    );

    // An app on the gateway has no URL to check.
    let path = format!("/api/v1/apps/{}/interactions-url", s.w.bot.id);
    let none = expect(hub, Method::GET, &path, ADMIN_TOKEN, None, 409).await;
    assert_eq!(none["error"]["code"], "no_interactions_url", "{none}");
}

async fn an_upgrade_that_changes_the_url_resets_it(options: Options) {
    let s = setup(options).await;
    let hub = s.hub();
    let (t, state) = s.checked_tracker(&script("good", "reply"), 1).await;
    assert_eq!(state["state"], "verified");
    let path = format!("/api/v1/apps/{}/manifest", t.app.id);
    // The same URL, another description: still verified, no new check.
    let mut same = super::tracker(&s.fake.url("localhost", &t.path));
    same["description"] = json!("Files tickets, now with more words");
    let up = expect(hub, Method::PUT, &path, &t.app.key, Some(same), 200).await;
    assert_eq!(up["interactionsUrl"]["state"], "verified", "{up}");
    // Another URL: unverified at once, then its own check.
    let moved = script("good", "accepted");
    let next = super::tracker(&s.fake.url("localhost", &moved));
    let up = expect(hub, Method::PUT, &path, &t.app.key, Some(next), 200).await;
    assert_eq!(
        up["interactionsUrl"],
        json!({"state": "unverified"}),
        "{up}"
    );
    jobs_done(hub, "app_url_verify", 2).await;
    assert_eq!(url_state(hub, t.app.id).await["state"], "verified");
    assert_eq!(s.fake.received_on(&moved).len(), 2);
    assert_eq!(
        s.fake.received_on(&t.path).len(),
        2,
        "the old URL is checked no more"
    );
}

/// Two checks of one URL overlap: the first is held at the app, the
/// second passes meanwhile, then the first ends failed. Only the newest
/// check's outcome lands (ADR 0032, "Review fixes"): the URL stays
/// verified. The runner is held off (its one early tick comes before any
/// job exists), so the checks are the two REST calls alone.
async fn a_stale_check_never_overwrites_a_newer_one(options: Options) {
    let s = setup(options.env("SWITCHBOARD_JOBS__POLL_INTERVAL_MS", 600_000)).await;
    let t = s.tracker(&script("stale-once", "reply")).await;
    let path = format!("/api/v1/apps/{}/interactions-url/verify", t.app.id);
    let hub = s.hub();
    let key = t.app.key.clone();
    let stale = async {
        let first = expect(hub, Method::POST, &path, &key, None, 200).await;
        let after = url_state(hub, t.app.id).await;
        (first, after)
    };
    let newer = async {
        s.fake.wait_on(&t.path, 1).await;
        let newer = expect(hub, Method::POST, &path, &key, None, 200).await;
        assert_eq!(newer["state"], "verified", "{newer}");
        s.fake.release();
    };
    let ((first, after), ()) = tokio::join!(stale, newer);
    assert_eq!(s.fake.received_on(&t.path).len(), 3, "held, then two");
    assert_eq!(first["state"], "verified", "the state it left: {first}");
    assert_eq!(after["state"], "verified", "{after}");
    assert!(after.get("reason").is_none(), "{after}");
    let failed = format!(
        "app=\"{}\",kind=\"verification\",outcome=\"failed\"",
        t.app.id
    );
    assert_eq!(
        hub.metric("switchboard_interaction_deliveries_total", &failed)
            .await,
        1.0,
        "the stale check did fail, and is counted"
    );
}

/// An app that answers the first request of a check with the echo and
/// the second with 401, checking nothing, would pass a fixed order: the
/// order is drawn for each check, so over 24 checks of a good app both
/// orders occur (a fixed order gives one, a fair draw both but with
/// probability 2^-23).
async fn the_order_of_the_two_requests_is_drawn_per_check(options: Options) {
    let s = setup(options.env("SWITCHBOARD_JOBS__POLL_INTERVAL_MS", 600_000)).await;
    let t = s.tracker(&script("good", "reply")).await;
    let path = format!("/api/v1/apps/{}/interactions-url/verify", t.app.id);
    for _ in 0..24 {
        let checked = expect(s.hub(), Method::POST, &path, &t.app.key, None, 200).await;
        assert_eq!(checked["state"], "verified", "{checked}");
    }
    let sent = s.fake.received_on(&t.path);
    assert_eq!(sent.len(), 48);
    let firsts: Vec<bool> = sent.chunks(2).map(|c| c[0].verified.is_ok()).collect();
    assert!(sent
        .chunks(2)
        .all(|c| c[0].verified.is_ok() != c[1].verified.is_ok()));
    assert!(
        firsts.contains(&true) && firsts.contains(&false),
        "{firsts:?}"
    );
}
