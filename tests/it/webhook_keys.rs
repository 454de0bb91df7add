//! Webhook signing keys: sealed at rest, rotated with overlap, published
//! without secrets; a canary secret never leaks.

use std::path::Path;

use serde_json::Value;
use switchboard::webhooks::signature::{headers, secret_key_string, verify, VerificationKey};

use crate::support::hub::Options;
use crate::support::TestHub;

const KEK: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn keys_cli(args: &[&str], data: &Path, kek: Option<&str>) -> (bool, String, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.arg("keys").args(args).arg("--data-dir").arg(data);
    if let Some(k) = kek {
        c.env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", k);
    }
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn keys_rotate_with_overlap_and_secrets_never_leak() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let canary_key = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
    let canary = secret_key_string(&canary_key);
    let secret_file = root.path().join("canary.key");
    std::fs::write(&secret_file, &canary).unwrap();

    let (ok, _, err) = keys_cli(&["rotate"], &data, None);
    assert!(!ok && err.contains("webhooks.key_encryption_key"), "{err}");
    let (ok, out1, err) = keys_cli(
        &["rotate", "--secret-file", secret_file.to_str().unwrap()],
        &data,
        Some(KEK),
    );
    assert!(ok, "{err}");
    let (ok, out2, err) = keys_cli(&["rotate"], &data, Some(KEK));
    assert!(ok, "{err}");
    let wrong = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
    let (ok, _, err) = keys_cli(&["rotate"], &data, Some(wrong));
    assert!(
        !ok && err.contains("does not open"),
        "a wrong key-encryption key is caught at rotation: {err}"
    );
    let (_, list, _) = keys_cli(&["list"], &data, Some(KEK));
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains(" active ") && list.contains(" secondary "),
        "{list}"
    );

    let hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..Options::default().env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
    })
    .await;
    let body = hub
        .http
        .get(format!("{}/api/v1/webhooks/keys", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let published: Value = serde_json::from_str(&body).unwrap();
    let keys = published["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys
        .iter()
        .all(|k| k["publicKey"].as_str().unwrap().starts_with("whpk_")));
    let states: Vec<&str> = keys.iter().map(|k| k["state"].as_str().unwrap()).collect();
    assert_eq!(states, vec!["active", "secondary"]);
    assert!(
        keys[1]["validUntil"].is_string(),
        "the secondary's overlap ends"
    );

    // The canary secret appears nowhere: API, CLI output, logs, the database file.
    let db = std::fs::read(data.join("switchboard.db")).unwrap();
    let wal = std::fs::read(data.join("switchboard.db-wal")).unwrap_or_default();
    let raw_seed = [42u8; 32];
    for (what, text) in [
        ("api", body.as_bytes()),
        ("cli", out1.as_bytes()),
        ("cli", out2.as_bytes()),
        ("log", hub.log().as_bytes()),
    ] {
        assert!(
            !String::from_utf8_lossy(text).contains(&canary),
            "{what} leaks the secret"
        );
    }
    for bytes in [&db, &wal] {
        assert!(
            !bytes.windows(32).any(|w| w == raw_seed),
            "the secret is sealed at rest"
        );
        assert!(!String::from_utf8_lossy(bytes).contains(&canary));
    }

    // During the overlap both keys sign, and receivers holding either accept.
    let mut config = switchboard::config::Config::default();
    config.server.data_dir = data.clone();
    config.webhooks.key_encryption_key = KEK.into();
    let store = switchboard::store::open(&config).await.unwrap();
    let now = switchboard::domain::now_millis();
    let signers = switchboard::webhooks::keys::signers(store.as_ref(), &config.webhooks, now)
        .await
        .unwrap();
    assert_eq!(signers.len(), 2);
    let [(_, id), (_, ts), (_, sig)] = headers("msg_1", now / 1000, b"{}", &signers);
    assert_eq!(sig.split(' ').count(), 2);
    for k in keys {
        let key = VerificationKey::parse(k["publicKey"].as_str().unwrap()).unwrap();
        assert_eq!(
            verify(&id, &ts, &sig, b"{}", &[key], now / 1000, 300),
            Ok(())
        );
    }
}
