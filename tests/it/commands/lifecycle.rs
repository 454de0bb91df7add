//! Commands come and go with the installation (ADR 0027 §2, §7): the
//! install creates the manifest's, an upgrade applies the diff by name and
//! keeps the API's, suspend hides them, resume shows them, uninstall
//! removes them; the audit row of each names what changed.

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, names, poll_manifest, setup, Setup};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{call, expect};

async fn audit_details(s: &Setup, action: &str) -> Vec<Value> {
    crate::installations::audit_details(&s.w.hub, &s.poll.id.to_string(), action).await
}

async fn install_creates_manifest_commands(options: Options) {
    let s = setup(options).await;
    let path = format!("/api/v1/apps/{}/commands", s.poll.id);
    let own = expect(&s.w.hub, Method::GET, &path, &s.poll.key, None, 200).await;
    let own = own["commands"].as_array().unwrap().clone();
    assert_eq!(names(&own), ["find", "purge", "vote"]);
    for c in &own {
        assert_eq!(c["appId"], json!(s.poll.id));
        assert_eq!(c["version"], json!(1));
        assert!(c.get("conversationId").is_none(), "hub-wide: {c}");
    }
    let vote = own.iter().find(|c| c["name"] == json!("vote")).unwrap();
    assert_eq!(vote["requiredLevel"], json!("write"));
    assert_eq!(vote["options"][0]["choices"][1]["value"], json!("no"));
    // Offered where the app holds write, to whoever holds each level.
    let mut alex = s.w.connect(&s.w.alex).await;
    assert_eq!(
        names(&s.listed(&mut alex, &s.w.alex, s.w.general).await),
        ["find", "purge", "vote"]
    );
    let mut sam = s.w.connect(&s.w.sam).await;
    assert_eq!(
        names(&s.listed(&mut sam, &s.w.sam, s.w.general).await),
        ["find"]
    );
    // Not where it holds nothing (Alex is admin of escalation too).
    assert!(s
        .listed(&mut alex, &s.w.alex, s.w.escalation)
        .await
        .is_empty());
    let rest = expect(
        &s.w.hub,
        Method::GET,
        &format!("/api/v1/conversations/{}/commands", s.w.general),
        &s.w.sam.key,
        None,
        200,
    )
    .await;
    assert_eq!(names(rest["commands"].as_array().unwrap()), ["find"]);
    let details = audit_details(&s, "app.install").await;
    assert_eq!(
        details,
        [json!({"commandsAdded": ["vote", "find", "purge"]})]
    );
}

async fn upgrade_applies_command_diff(options: Options) {
    let s = setup(options).await;
    let path = format!("/api/v1/apps/{}/commands", s.poll.id);
    let extra = json!({"command": {"name": "extra", "description": "The app's own"}});
    expect(&s.w.hub, Method::POST, &path, &s.poll.key, Some(extra), 201).await;
    let vote_before = s.command_id("vote").await;
    let purge_before = s.command_id("purge").await;
    let mut next = poll_manifest();
    next["commands"][0]["description"] = json!("Cast a vote now");
    next["commands"][1] = json!({"name": "tally", "description": "Count the votes"});
    let manifest_path = format!("/api/v1/apps/{}/manifest", s.poll.id);
    let v = expect(
        &s.w.hub,
        Method::PUT,
        &manifest_path,
        &s.poll.key,
        Some(next.clone()),
        200,
    )
    .await;
    assert_eq!(
        v["commands"],
        json!({"added": ["tally"], "changed": ["vote"], "removed": ["find"]})
    );
    let own = expect(&s.w.hub, Method::GET, &path, &s.poll.key, None, 200).await;
    let own = own["commands"].as_array().unwrap().clone();
    assert_eq!(names(&own), ["extra", "purge", "tally", "vote"]);
    let vote = own.iter().find(|c| c["name"] == json!("vote")).unwrap();
    assert_eq!(vote["version"], json!(2));
    assert_eq!(vote["description"], json!("Cast a vote now"));
    assert_eq!(
        s.command_id("vote").await,
        vote_before,
        "a change keeps the id"
    );
    assert_eq!(s.command_id("purge").await, purge_before);
    // The same manifest again changes nothing.
    let v = expect(
        &s.w.hub,
        Method::PUT,
        &manifest_path,
        &s.poll.key,
        Some(next.clone()),
        200,
    )
    .await;
    assert_eq!(
        v["commands"],
        json!({"added": [], "changed": [], "removed": []})
    );
    // A manifest naming the API's command is refused, whole.
    next["commands"][2] = json!({"name": "extra", "description": "Clash"});
    let a = call(
        &s.w.hub,
        Method::PUT,
        &manifest_path,
        &s.poll.key,
        Some(next),
    )
    .await;
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(
        a.json()["error"]["details"],
        json!([{"pointer": "/commands/2/name", "message": "names a command the app registered itself"}])
    );
    let own = expect(&s.w.hub, Method::GET, &path, &s.poll.key, None, 200).await;
    assert_eq!(
        names(own["commands"].as_array().unwrap()),
        ["extra", "purge", "tally", "vote"]
    );
    let details = audit_details(&s, "app.upgrade").await;
    assert_eq!(
        details[0],
        json!({"commandsAdded": ["tally"], "commandsChanged": ["vote"], "commandsRemoved": ["find"]})
    );
    assert_eq!(
        details[1],
        json!(null),
        "an upgrade changing nothing records none"
    );
}

async fn suspend_hides_and_resume_shows_commands(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let mut alex = s.w.connect(&s.w.alex).await;
    s.lifecycle("suspend").await;
    assert!(s.listed(&mut alex, &s.w.alex, s.w.general).await.is_empty());
    crate::support::raw::same_answer(
        &mut alex,
        "person/command/invoke",
        "NotFoundError",
        vote,
        |id| json!({"commandId": id, "conversationId": s.w.general, "options": {"choice": "yes"}}),
    )
    .await;
    s.lifecycle("resume").await;
    // The app posted no card: its suspend disabled nothing, and says so by
    // recording no details.
    assert_eq!(audit_details(&s, "app.suspend").await, [json!(null)]);
    assert_eq!(audit_details(&s, "app.resume").await, [json!(null)]);
    assert_eq!(
        names(&s.listed(&mut alex, &s.w.alex, s.w.general).await),
        ["find", "purge", "vote"]
    );
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            vote,
            s.w.general,
            json!({"choice": "yes"}),
        )
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
}

async fn uninstall_removes_commands(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let mut alex = s.w.connect(&s.w.alex).await;
    s.lifecycle("uninstall").await;
    assert!(s.listed(&mut alex, &s.w.alex, s.w.general).await.is_empty());
    let details = audit_details(&s, "app.uninstall").await;
    assert_eq!(
        details,
        [json!({"commandsRemoved": ["find", "purge", "vote"]})]
    );
    // A new install starts from the manifest, with new rows; the old id
    // is gone for good.
    let path = format!("/api/v1/apps/{}/installation", s.poll.id);
    let a = call(&s.w.hub, Method::POST, &path, ADMIN_TOKEN, Some(json!({}))).await;
    assert_eq!(a.status, 201, "{}", a.body);
    // The uninstall deleted the app's grants: write on general again.
    let alex_key = s.w.alex.key.clone();
    crate::support::world::grant(
        &s.w.hub,
        &alex_key,
        crate::support::world::principal(s.poll.id),
        crate::support::world::on_channel(s.w.general),
        "write",
    )
    .await;
    let listed = s.listed(&mut alex, &s.w.alex, s.w.general).await;
    assert_eq!(names(&listed), ["find", "purge", "vote"]);
    assert!(listed.iter().all(|c| c["commandId"] != json!(vote)));
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            vote,
            s.w.general,
            json!({"choice": "yes"}),
        )
        .await;
    assert_eq!(r["error"]["_tag"], json!("NotFoundError"), "{r}");
}

both!(
    install_creates_manifest_commands,
    upgrade_applies_command_diff,
    suspend_hides_and_resume_shows_commands,
    uninstall_removes_commands,
);
