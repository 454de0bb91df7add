//! The operator's place commands (`switchboard space|channel|group|grant`)
//! on a data directory, then a hub on it deciding by what they wrote.

use reqwest::Method;
use serde_json::json;

use super::{ok as answered, refused, send_as};
use crate::support::hub::Options;
use crate::support::world::{call, expect, grant, on_channel, person, principal, world};
use crate::support::TestHub;

fn cli(data: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn ok(data: &std::path::Path, args: &[&str], label: &str) -> String {
    let (success, text) = cli(data, args);
    assert!(success, "{args:?}: {text}");
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_operator_manages_places_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crate::support::migrate(&data, None);
    let person = ok(&data, &["person", "create", "--name", "Dana"], "person id:");
    let (_, created) = cli(&data, &["person", "create", "--name", "Eli"]);
    assert!(created.contains("person key:"), "{created}");
    let space = ok(&data, &["space", "create", "--name", "Ops"], "space id:");
    let channel = ok(
        &data,
        &["channel", "create", "--space", &space, "--name", "alerts"],
        "channel id:",
    );
    let (refused, text) = cli(
        &data,
        &["channel", "create", "--space", &space, "--name", "Bad Name"],
    );
    assert!(!refused && text.contains("--name"), "{text}");
    let group = ok(&data, &["group", "create", "--name", "oncall"], "group id:");
    ok(
        &data,
        &["group", "add", "--group", &group, "--principal", &person],
        "",
    );
    let grant = ok(
        &data,
        &[
            "grant",
            "put",
            "--group",
            &group,
            "--channel",
            &channel,
            "--level",
            "write",
        ],
        "grant id:",
    );
    let (_, listed) = cli(&data, &["grant", "list", "--channel", &channel]);
    assert!(
        listed.contains(&grant) && listed.contains(&format!("group {group}")),
        "{listed}"
    );
    let (refused, text) = cli(
        &data,
        &[
            "grant",
            "put",
            "--principal",
            &person,
            "--space",
            &space,
            "--level",
            "owner",
        ],
    );
    assert!(!refused && text.contains("--level"), "{text}");

    // A hub on that directory: Dana (by the group) writes the channel.
    let (_, dana) = cli(&data, &["person", "rotate-key", "--id", &person]);
    let key = dana
        .split_whitespace()
        .find(|w| w.starts_with("sbk_person_"))
        .unwrap_or_else(|| panic!("no key in {dana}"))
        .to_string();
    let hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..TestHub::fast_options()
    })
    .await;
    let path = format!("/api/v1/conversations/{channel}/messages");
    let body = Some(json!({ "parts": [{ "type": "text", "text": "from the cli's grant" }] }));
    expect(&hub, Method::POST, &path, &key, body, 201).await;
    let space_path = format!("/api/v1/spaces/{space}");
    let v = expect(&hub, Method::GET, &space_path, &key, None, 200).await;
    assert_eq!(v["space"]["name"], json!("Ops"));
    drop(hub);
    // Deleted by the CLI: gone for a hub started after it.
    ok(&data, &["grant", "delete", "--id", &grant], "");
    let hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..TestHub::fast_options()
    })
    .await;
    let a = call(&hub, Method::GET, &path, &key, None).await;
    assert_eq!(a.status, 404, "{}", a.body);
}

/// A grant the CLI deletes while a hub runs on the same directory reaches
/// the hub's warm cache within a revocation sweep (ADR 0020 §3): the
/// store's rights version moved, so the sweep drops the cached channels.
#[tokio::test]
async fn a_grant_the_cli_deletes_leaves_a_running_hubs_cache() {
    let options =
        TestHub::fast_options().env("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", 100);
    let w = world(options).await;
    let ria = person(&w.hub, "Ria").await;
    let holder = principal(ria.id);
    let given = grant(&w.hub, &w.alex.key, holder, on_channel(w.general), "write").await;
    let mut s = w.connect(&ria).await;
    // Warm: the send is decided on the cached channel entry holding Ria.
    answered(&send_as(&mut s, &ria, w.general, "i write", json!({})).await);
    answered(&send_as(&mut s, &ria, w.general, "from the cache", json!({})).await);

    let data = w.hub.dir.path().join("data");
    let id = given["grantId"].as_str().unwrap();
    ok(&data, &["grant", "delete", "--id", id], "");
    // Many sweep intervals: a send before the sweep may pass, one after it
    // is the unknown conversation's.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let frame = send_as(&mut s, &ria, w.general, "still here?", json!({})).await;
        if frame.get("error").is_some() {
            assert_eq!(refused(&frame, "NotFoundError"), "", "{frame}");
            assert_eq!(frame["error"]["message"], json!("conversation not found"));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a grant the CLI deleted still lets its holder send after many sweeps"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
