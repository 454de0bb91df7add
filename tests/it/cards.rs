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
