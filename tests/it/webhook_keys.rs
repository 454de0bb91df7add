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
    crate::support::migrate(&data, None);
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

/// The hub's own signed requests, end to end: a real `switchboard serve`
/// sends through its egress client to the HTTPS receiver, which verifies
/// with the keys the hub publishes, through a rotation.
#[tokio::test]
async fn published_keys_verify_the_hubs_signed_requests() {
    use crate::support::receiver::Receiver;

    let receiver = Receiver::start().await;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let ca_file = root.path().join("ca.pem");
    std::fs::write(&ca_file, &receiver.ca.ca_pem).unwrap();
    let entry = format!("[\"localhost:{}\"]", receiver.port());
    // A proxy in the environment must be ignored: egress never uses one.
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let proxied = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = proxied.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = proxy.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..Options::default()
            .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
            .env("SWITCHBOARD_EGRESS__ALLOWLIST", &entry)
            .env("SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE", &entry)
            .env("SWITCHBOARD_EGRESS__EXTRA_CA_FILE", ca_file.display())
            .env("HTTPS_PROXY", &proxy_url)
            .env("https_proxy", &proxy_url)
            .env("ALL_PROXY", &proxy_url)
            .env("HTTP_PROXY", &proxy_url)
            .env("NO_PROXY", "")
            .env("no_proxy", "")
    })
    .await;
    let send = |url: String, token: Option<&'static str>| {
        let mut req = hub
            .http
            .post(format!("{}/api/v1/webhooks/test", hub.base))
            .json(&serde_json::json!({ "url": url }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let token = Some(crate::support::hub::ADMIN_TOKEN);
    let verified_url = receiver.url("localhost", "/verified");

    let (status, _) = send(verified_url.clone(), None).await;
    assert_eq!(status, 401, "operator only");
    let (status, body) = send(verified_url.clone(), token).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("no_signing_key")),
        "{body}"
    );
    assert_eq!(receiver.connections(), 0);

    let published = || async {
        let body: Value = hub
            .http
            .get(format!("{}/api/v1/webhooks/keys", hub.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| VerificationKey::parse(k["publicKey"].as_str().unwrap()).unwrap())
            .collect::<Vec<_>>()
    };
    let (ok, _, err) = keys_cli(&["rotate"], &data, Some(KEK));
    assert!(ok, "{err}");
    let first = published().await;
    assert_eq!(first.len(), 1);
    receiver.trust_keys(first.clone());
    let (status, body) = send(verified_url.clone(), token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ok", "{body}");
    assert_eq!(
        body["status"], 200,
        "the receiver verified the signature: {body}"
    );
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].verified, Ok(()));
    assert_eq!(got[0].header("webhook-id"), body["webhookId"].as_str());
    let event: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(event["type"], "webhook.test");

    // After a rotation both keys sign; a receiver holding either accepts.
    let (ok, _, err) = keys_cli(&["rotate"], &data, Some(KEK));
    assert!(ok, "{err}");
    let both = published().await;
    assert_eq!(both.len(), 2);
    let (status, body) = send(verified_url.clone(), token).await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from(200)),
        "{body}"
    );
    let request = receiver.wait_for(2).await.pop().unwrap();
    let signature = request.header("webhook-signature").unwrap();
    assert_eq!(signature.split(' ').count(), 2, "{signature}");
    assert!(signature.split(' ').all(|s| s.starts_with("v1a,")));
    for key in &both {
        assert_eq!(
            verify(
                request.header("webhook-id").unwrap(),
                request.header("webhook-timestamp").unwrap(),
                signature,
                &request.body,
                std::slice::from_ref(key),
                chrono::Utc::now().timestamp(),
                300,
            ),
            Ok(())
        );
    }

    // The hub's own rules apply: wrong port, plain http.
    let wrong_port = format!("https://localhost:{}/verified", receiver.port() + 1);
    let (status, body) = send(wrong_port, token).await;
    assert_eq!(
        (status, body["outcome"].as_str(), body["reason"].as_str()),
        (200, Some("blocked"), Some("not_allowed"))
    );
    let plain = format!("http://localhost:{}/verified", receiver.port());
    let (status, body) = send(plain, token).await;
    assert_eq!(
        (status, &body["error"]["reason"]),
        (400, &serde_json::json!("not_https")),
        "a URL that can never be sent to is a bad request: {body}"
    );
    assert_eq!(receiver.received().len(), 2);
    assert_eq!(
        proxied.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the proxy from the environment was never used"
    );
    let metrics = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            r#"switchboard_egress_blocked_total{purpose="webhook",reason="not_allowed"} 1"#
        ),
        "{metrics}"
    );

    // Logs name the host and the outcome, never the path or a signature.
    let log = hub.log();
    assert!(
        log.contains("egress request") && log.contains("localhost"),
        "{log}"
    );
    assert!(!log.contains("/verified"), "the URL path stays out of logs");
    assert!(!log.contains(signature), "signatures stay out of logs");
}

/// Runs `switchboard serve` on `data` and expects it to refuse to start:
/// returns its stderr. A hub that starts instead is stopped and fails the test.
async fn serve_refuses(data: &Path, env: &[(&str, &str)]) -> String {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.arg("serve")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c.spawn().unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the hub started although its key-encryption key is wrong")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && !stdout.contains("switchboard listening"),
        "{stdout}\n{stderr}"
    );
    stderr
}

#[tokio::test]
async fn a_wrong_key_encryption_key_stops_the_hub_at_startup() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    // A hub with the right key runs, makes a signing key, and stops.
    let mut hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..Options::default().env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
    })
    .await;
    let (ok, _, err) = keys_cli(&["rotate"], &data, Some(KEK));
    assert!(ok, "{err}");
    hub.signal(libc::SIGTERM);
    assert!(hub
        .wait_exit(std::time::Duration::from_secs(30))
        .await
        .success());

    let wrong = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
    let err = serve_refuses(
        &data,
        &[("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", wrong)],
    )
    .await;
    assert!(
        err.contains("webhooks.key_encryption_key") && err.contains("does not open"),
        "{err}"
    );
    assert!(!err.contains(wrong), "the key is never printed: {err}");

    let file = root.path().join("kek");
    std::fs::write(&file, wrong).unwrap();
    let err = serve_refuses(
        &data,
        &[(
            "SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY_FILE",
            file.to_str().unwrap(),
        )],
    )
    .await;
    assert!(
        err.contains("webhooks.key_encryption_key_file") && err.contains("does not open"),
        "{err}"
    );
    assert!(!err.contains(wrong), "the key is never printed: {err}");

    let err = serve_refuses(&data, &[]).await;
    assert!(
        err.contains("neither webhooks.key_encryption_key nor webhooks.key_encryption_key_file"),
        "{err}"
    );

    // The right key still starts it.
    let mut hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..Options::default().env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
    })
    .await;
    hub.signal(libc::SIGTERM);
    let status = hub.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?} {}", hub.log());

    // The way back for an operator who lost the key: a plain rotation under
    // a new key refuses (it must open the keys that sign now), a discarding
    // one retires them unopened, and the hub starts under the new key.
    let (ok, _, err) = keys_cli(&["rotate"], &data, Some(wrong));
    assert!(!ok && err.contains("does not open"), "{err}");
    let (ok, _, err) = keys_cli(&["rotate", "--discard-unreadable"], &data, Some(wrong));
    assert!(ok, "{err}");
    let _hub = TestHub::start_with(Options {
        dir: Some(data.clone()),
        ..Options::default().env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", wrong)
    })
    .await;
}
