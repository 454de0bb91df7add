//! Signed App Cards: canonical signing, did:key authors, per-file integrity,
//! and one refusal code per broken rule, through the CLI authors use.

use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};
use switchboard::domain::card::{self, did_key};

fn cli(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn card_doc() -> Value {
    json!({
        "schema": "muretai/app/1",
        "id": "werewolf",
        "name": "Werewolf",
        "tagline": "Who is the wolf?",
        "description": "A social deduction game for agents.",
        "version": "1.2.0",
        "category": "game",
        "primitives": ["send_message", "read_inbox", "persona", "rooms"],
        "entry": {
            "readme": "README.md",
            "persona": "persona.md",
            "kickoff": ["Night falls."],
            "scripts": ["scripts/moderator.js"],
            "integrity": {}
        },
        "coreChanges": false,
        "author": "did:key:placeholder"
    })
}

/// A package directory with its files and a key file; returns (dir, key path).
fn package(root: &Path, doc: &Value) -> (PathBuf, PathBuf) {
    let dir = root.join("pkg");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("README.md"), "# Werewolf\n").unwrap();
    std::fs::write(dir.join("persona.md"), "You are the moderator.\n").unwrap();
    std::fs::write(
        dir.join("scripts/moderator.js"),
        "export const night = true;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("app.json"),
        serde_json::to_string_pretty(doc).unwrap(),
    )
    .unwrap();
    let key = root.join("author.key");
    if !key.exists() {
        let (ok, out, err) = cli(&["card", "keygen", "--out", key.to_str().unwrap()]);
        assert!(ok, "{err}");
        assert!(out.trim().starts_with("did:key:z6Mk"), "{out}");
    }
    (dir, key)
}

fn signed(root: &Path) -> (PathBuf, PathBuf) {
    let (dir, key) = package(root, &card_doc());
    let (ok, _, err) = cli(&[
        "card",
        "sign",
        dir.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    (dir, key)
}

fn verify_code(dir: &Path) -> String {
    let (ok, out, err) = cli(&["card", "verify", dir.to_str().unwrap()]);
    if ok {
        return format!("ok: {out}");
    }
    err.split("card refused (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or(&err)
        .to_string()
}

fn edit(dir: &Path, f: impl FnOnce(&mut Value)) {
    let path = dir.join("app.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut doc);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// Re-signs app.json with `key` over `bytes_of(card without sig)`.
fn resign(dir: &Path, key: &SigningKey, bytes_of: impl Fn(&Value) -> Vec<u8>) {
    edit(dir, |doc| {
        doc.as_object_mut().unwrap().remove("sig");
        let sig = key.sign(&bytes_of(doc));
        doc["sig"] = json!(base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()));
    });
}

#[test]
fn rfc_8785_examples_canonicalize_exactly() {
    let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
    let expected = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
    let v: Value = serde_json::from_str(input).unwrap();
    assert_eq!(
        String::from_utf8(card::canonical_bytes(&v)).unwrap(),
        expected
    );

    // Keys sort by UTF-16 code units (the emoji's surrogates before U+FB33).
    let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
    let v: Value = serde_json::from_str(input).unwrap();
    let out: Value = serde_json::from_slice(&card::canonical_bytes(&v)).unwrap();
    let order: Vec<&str> = out
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    let canonical = String::from_utf8(card::canonical_bytes(&v)).unwrap();
    let positions: Vec<usize> = [
        "Carriage Return",
        "\"One\"",
        "Control",
        "Latin Small Letter O",
        "Euro Sign",
        "Grinning Face",
        "Hebrew Letter",
    ]
    .iter()
    .map(|s| canonical.find(s).unwrap())
    .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{canonical}");
    assert_eq!(order.len(), 7);
}

#[test]
fn a_card_signed_by_the_cli_verifies_and_packs() {
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = signed(root.path());
    assert!(
        verify_code(&dir).starts_with("ok: ok werewolf 1.2.0 by did:key:z6Mk"),
        "{}",
        verify_code(&dir)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(dir.join("app.json")).unwrap()).unwrap();
    assert_eq!(doc["entry"]["integrity"].as_object().unwrap().len(), 3);
    assert!(doc["entry"]["integrity"]["scripts/moderator.js"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let card: card::AppCard = serde_json::from_value(doc).unwrap();
    let granted = card::primitives::granted_methods(&card.primitives);
    assert!(
        granted.contains("rooms_send")
            && granted.contains("get_persona")
            && !granted.contains("coord")
    );
    let tar = root.path().join("werewolf.tar");
    let (ok, _, err) = cli(&[
        "card",
        "pack",
        dir.to_str().unwrap(),
        "--out",
        tar.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let first = std::fs::read(&tar).unwrap();
    let (ok, _, _) = cli(&[
        "card",
        "pack",
        dir.to_str().unwrap(),
        "--out",
        root.path().join("again.tar").to_str().unwrap(),
    ]);
    assert!(ok);
    assert_eq!(
        first,
        std::fs::read(root.path().join("again.tar")).unwrap(),
        "packing is reproducible"
    );
}

#[test]
fn every_broken_rule_is_refused_with_its_own_code() {
    type Breaker = Box<dyn Fn(&Path, &SigningKey)>;
    let other = SigningKey::from_bytes(&[7u8; 32]);
    let cases: Vec<(&str, Breaker)> = vec![
        (
            "integrity_mismatch",
            Box::new(|d, _| std::fs::write(d.join("README.md"), "# Wolf!\n").unwrap()),
        ),
        (
            "unlisted_file",
            Box::new(|d, _| std::fs::write(d.join("extra.txt"), "hi").unwrap()),
        ),
        (
            "missing_file",
            Box::new(|d, _| std::fs::remove_file(d.join("persona.md")).unwrap()),
        ),
        (
            "symlink",
            Box::new(|d, _| std::os::unix::fs::symlink("/etc/passwd", d.join("link")).unwrap()),
        ),
        (
            "bad_signature",
            Box::new(|d, k| resign(d, k, |doc| serde_json::to_vec(doc).unwrap())), // not canonical bytes
        ),
        (
            "bad_signature",
            Box::new(move |d, _| resign(d, &other, card::canonical_bytes)),
        ),
        (
            "bad_signature",
            Box::new(|d, _| {
                let someone = SigningKey::from_bytes(&[9u8; 32]);
                edit(d, |doc| {
                    doc["author"] = json!(did_key::encode(&someone.verifying_key()))
                });
            }),
        ),
        (
            "bad_author",
            Box::new(|d, _| edit(d, |doc| doc["author"] = json!("did:web:example.com"))),
        ),
        (
            "unknown_primitive",
            Box::new(|d, k| {
                edit(d, |doc| {
                    doc["primitives"] = json!(["send_message", "shell"])
                });
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "core_changes",
            Box::new(|d, k| {
                edit(d, |doc| doc["coreChanges"] = json!(true));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "invalid_version",
            Box::new(|d, k| {
                edit(d, |doc| doc["version"] = json!("1.2"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "invalid_schema",
            Box::new(|d, k| {
                edit(d, |doc| doc["category"] = json!("weapons"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "bad_path",
            Box::new(|d, k| {
                edit(d, |doc| {
                    doc["entry"]["integrity"]["../escape"] =
                        json!(format!("sha256:{}", "0".repeat(64)))
                });
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "invalid_schema",
            Box::new(|d, k| {
                edit(d, |doc| doc["homepage"] = json!("https://example.com"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "invalid_id",
            Box::new(|d, k| {
                edit(d, |doc| doc["id"] = json!("Chess"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "unlisted_entry",
            Box::new(|d, k| {
                edit(d, |doc| doc["entry"]["wasm"] = json!("app.wasm"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "bad_path",
            Box::new(|d, k| {
                edit(d, |doc| doc["entry"]["stage"] = json!("../../etc/passwd"));
                resign(d, k, card::canonical_bytes);
            }),
        ),
        (
            "duplicate_key",
            Box::new(|d, _| {
                let text = std::fs::read_to_string(d.join("app.json")).unwrap();
                let text = text.replacen(
                    "\"coreChanges\": false",
                    "\"coreChanges\": false,\n  \"coreChanges\": false",
                    1,
                );
                std::fs::write(d.join("app.json"), text).unwrap();
            }),
        ),
    ];
    for (expected, breaker) in cases {
        let root = tempfile::tempdir().unwrap();
        let (dir, key) = signed(root.path());
        assert!(
            verify_code(&dir).starts_with("ok"),
            "the fresh card verifies"
        );
        let key = switchboard::cards::read_key(&key).unwrap();
        breaker(&dir, &key);
        assert_eq!(verify_code(&dir), expected);
    }
}

fn with_data(args: &[&str], data: &Path) -> (bool, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--data-dir");
    all.push(data.to_str().unwrap());
    cli(&all)
}

#[test]
fn the_catalogue_keeps_authors_and_travels_between_hubs() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("hub-a");
    crate::support::migrate(&data, None);
    let (dir, key) = signed(root.path());
    let (ok, out, err) = with_data(&["card", "install", dir.to_str().unwrap()], &data);
    assert!(ok, "{err}");
    assert!(out.starts_with("installed werewolf 1.2.0"), "{out}");

    // A new version by the same author installs.
    edit(&dir, |doc| doc["version"] = json!("1.3.0"));
    let (ok, _, err) = cli(&[
        "card",
        "sign",
        dir.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(with_data(&["card", "install", dir.to_str().unwrap()], &data).0);

    // A new version by someone else needs the operator's force.
    edit(&dir, |doc| doc["version"] = json!("2.0.0"));
    let stranger = root.path().join("stranger.key");
    assert!(cli(&["card", "keygen", "--out", stranger.to_str().unwrap()]).0);
    assert!(
        cli(&[
            "card",
            "sign",
            dir.to_str().unwrap(),
            "--key",
            stranger.to_str().unwrap()
        ])
        .0
    );
    let (ok, _, err) = with_data(&["card", "install", dir.to_str().unwrap()], &data);
    assert!(!ok);
    assert!(err.contains("needs the operator's force"), "{err}");
    assert!(
        with_data(
            &["card", "install", dir.to_str().unwrap(), "--force-author"],
            &data
        )
        .0
    );

    let (_, list, _) = with_data(&["card", "list"], &data);
    assert_eq!(list.lines().count(), 3, "{list}");
    let (ok, show, _) = with_data(&["card", "show", "werewolf"], &data);
    assert!(ok && show.contains("\"sig\""));

    // Export on hub A, import on hub B: the same cards.
    let export = root.path().join("catalogue.json");
    let (ok, _, err) = with_data(
        &[
            "card",
            "export",
            "--out",
            export.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        &data,
    );
    assert!(ok, "{err}");
    let other = root.path().join("hub-b");
    crate::support::migrate(&other, None);
    let operator = cli(&[
        "card",
        "keygen",
        "--out",
        root.path().join("unused.key").to_str().unwrap(),
    ])
    .1;
    let (ok, _, err) = with_data(
        &[
            "card",
            "import",
            export.to_str().unwrap(),
            "--trusted-signer",
            operator.trim(),
        ],
        &other,
    );
    assert!(
        !ok && err.contains("bad_signature"),
        "a catalogue from an untrusted signer is refused: {err}"
    );
    let signer = export_signer(&export);
    let (ok, out, err) = with_data(
        &[
            "card",
            "import",
            export.to_str().unwrap(),
            "--trusted-signer",
            &signer,
            "--force-author",
        ],
        &other,
    );
    assert!(ok, "{err}");
    assert!(out.contains("imported 3"), "{out}");
    let (_, list_b, _) = with_data(&["card", "list"], &other);
    assert_eq!(list_b, list);

    // A tampered export is refused.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    doc["cards"][0]["tagline"] = json!("Who is the wolf now?");
    std::fs::write(&export, serde_json::to_vec(&doc).unwrap()).unwrap();
    crate::support::migrate(&root.path().join("hub-c"), None);
    let (ok, _, err) = with_data(
        &[
            "card",
            "import",
            export.to_str().unwrap(),
            "--trusted-signer",
            &signer,
        ],
        &root.path().join("hub-c"),
    );
    assert!(!ok);
    assert!(err.contains("bad_signature"), "{err}");
}

#[tokio::test]
async fn operators_install_cards_over_rest_and_anyone_lists_them() {
    let hub = crate::support::TestHub::start().await;
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = signed(root.path());
    let card: Value =
        serde_json::from_slice(&std::fs::read(dir.join("app.json")).unwrap()).unwrap();
    let b64 = |p: &str| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir.join(p)).unwrap())
    };
    let files = json!({
        "README.md": b64("README.md"),
        "persona.md": b64("persona.md"),
        "scripts/moderator.js": b64("scripts/moderator.js"),
    });
    let url = format!("{}/api/v1/cards", hub.base);
    let r = hub
        .http
        .post(&url)
        .json(&json!({"card": card, "files": files}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "operators only");
    let r = hub
        .http
        .post(&url)
        .bearer_auth(crate::support::hub::ADMIN_TOKEN)
        .json(&json!({"card": card, "files": {"README.md": b64("README.md")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        json!("missing_file")
    );
    let r = hub
        .http
        .post(&url)
        .bearer_auth(crate::support::hub::ADMIN_TOKEN)
        .json(&json!({"card": card, "files": files}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let list: Value = hub
        .http
        .get(&url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["cards"][0]["id"], json!("werewolf"));
    assert_eq!(list["cards"][0]["author"], card["author"]);
    assert_eq!(list["cards"][0]["integrity"].as_object().unwrap().len(), 3);
}

fn export_signer(path: &Path) -> String {
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["signer"].as_str().unwrap().to_string()
}
