//! The child's isolation (ADR 0031 §4): no network (a TCP connect to a
//! listener on the host's loopback fails and the listener sees nothing),
//! none of the hub's environment, no descriptor but the broker channel, no
//! file outside its copy and the system's directories,
//! and files changed after install refused `integrity_mismatch`.

use super::{card, install, run};

const PROBE: &str = r#"
import os, socket
from sb import out, text

port = int(open("port.txt").read())
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    out(connected=True)
except OSError as e:
    out(connected=False, errno=e.errno)

out(secret=os.environ.get("HOSTED_TEST_SECRET"), admin=os.environ.get("SWITCHBOARD_ADMIN__TOKEN"),
    keys=sorted(os.environ))
opened = []
for fd in range(0, 256):
    try:
        os.fstat(fd)
        opened.append(fd)
    except OSError:
        pass
out(fds=opened)

def attempt(f):
    try:
        f()
        return "allowed"
    except OSError as e:
        return e.errno

outside = open("outside.txt").read().strip()
out(files={
    "read_db": attempt(lambda: open(outside + "/data/switchboard.db", "rb").read(1)),
    "read_secret": attempt(lambda: open(outside + "/secret.txt").read()),
    "write_outside": attempt(lambda: open(outside + "/dropped.txt", "w").write("x")),
    "write_tmp": attempt(lambda: open("/tmp/hosted-dropped.txt", "w").write("x")),
    "write_own": attempt(lambda: open("scratch.txt", "w").write("x")),
    "read_system": attempt(lambda: open("/etc/hostname").read()),
})
out(whoami=text("whoami"))
"#;

#[tokio::test]
async fn the_child_has_no_network_no_hub_environment_and_only_its_channel() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "hub-side secret").unwrap();
    let data = outside.path().join("data");
    let c = card(
        "probe",
        &["whoami"],
        PROBE,
        &[
            ("port.txt", &port),
            ("outside.txt", outside.path().to_str().unwrap()),
        ],
    );
    install(&c, &data);
    let ran = run(
        "probe",
        &data,
        &[
            ("HOSTED_TEST_SECRET", "s3cr3t-value"),
            (
                "SWITCHBOARD_ADMIN__TOKEN",
                "admin-token-of-the-hub-0123456789",
            ),
        ],
    )
    .await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    let net = ran.line("connected");
    assert_eq!(net["connected"], false, "{net}");
    // ENETUNREACH: the namespace has no route at all, not even loopback.
    assert_eq!(net["errno"], 101, "{net}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the listener saw a connection: {other:?}"),
    }
    let env = ran.line("secret");
    assert!(env["secret"].is_null() && env["admin"].is_null(), "{env}");
    let keys: Vec<&str> = env["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for key in [
        "SWITCHBOARD_RUN_TOKEN",
        "SWITCHBOARD_BROKER_FD",
        "HOME",
        "PATH",
    ] {
        assert!(keys.contains(&key), "{keys:?}");
    }
    assert!(
        !keys.iter().any(|k| k.starts_with("SWITCHBOARD_")
            && !k.starts_with("SWITCHBOARD_RUN")
            && *k != "SWITCHBOARD_BROKER_FD"),
        "{keys:?}"
    );
    assert!(!ran.stdout.contains("s3cr3t-value"));
    assert_eq!(ran.line("fds")["fds"], serde_json::json!([0, 1, 2, 3]));
    // Landlock: the hub's files and everything outside the copy are out of
    // reach (EACCES), the system's directories readable, the copy writable.
    let files = ran.line("files")["files"].clone();
    for denied in ["read_db", "read_secret", "write_outside", "write_tmp"] {
        assert_eq!(files[denied], 13, "{denied}: {files}");
    }
    assert_eq!(files["write_own"], "allowed", "{files}");
    assert_eq!(files["read_system"], "allowed", "{files}");
    assert!(!outside.path().join("dropped.txt").exists());
    assert_eq!(ran.line("whoami")["whoami"]["cardId"], "probe");
    assert!(!ran.end().contains("unisolated"), "{}", ran.end());
}

#[tokio::test]
async fn a_file_changed_after_install_refuses_the_run_integrity_mismatch() {
    let c = card("tamper", &["whoami"], "print('ran')\n", &[]);
    install(&c, &c.data());
    std::fs::write(c.dir().join("main.py"), "print('changed')\n").unwrap();
    let ran = run(c.dir().to_str().unwrap(), &c.data(), &[]).await;
    assert!(!ran.ok);
    assert!(
        ran.stderr.contains("run refused (integrity_mismatch)") && ran.stderr.contains("main.py"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stdout.contains("changed") && !ran.stdout.contains("ran"));
    // The hub's kept copy changed in the database: refused the same way.
    let db =
        crate::support::legacy_db::LegacyDb::open_sqlite(&c.data().join("switchboard.db")).await;
    db.exec(
        "UPDATE card_files SET content = X'7072696e7428276576696c2729' WHERE card_id = 'tamper' AND path = 'main.py'",
        &[],
    )
    .await;
    db.close().await;
    let ran = run("tamper", &c.data(), &[]).await;
    assert!(!ran.ok);
    assert!(
        ran.stderr.contains("run refused (integrity_mismatch)"),
        "{}",
        ran.stderr
    );
    // Nothing ran, so nothing was recorded.
    let (ok, out, _) = super::cli_sync(&["app", "runs", "--data-dir", c.data().to_str().unwrap()]);
    assert!(ok && out.trim().is_empty(), "{out}");
}

#[tokio::test]
async fn a_card_not_in_the_catalogue_does_not_run() {
    let c = card("stranger", &["whoami"], "print('ran')\n", &[]);
    let ran = run(c.dir().to_str().unwrap(), &c.data(), &[]).await;
    assert!(!ran.ok);
    assert!(
        ran.stderr.contains("run refused (card_not_installed)"),
        "{}",
        ran.stderr
    );
    let ran = run("stranger", &c.data(), &[]).await;
    assert!(
        ran.stderr.contains("run refused (card_not_found)"),
        "{}",
        ran.stderr
    );
    // Every primitive is served: a card with the `rooms` feature runs.
    let c = card("rooms", &["rooms"], "print('ran')\n", &[]);
    install(&c, &c.data());
    let ran = run("rooms", &c.data(), &[]).await;
    assert!(ran.ok && ran.stdout.contains("ran"), "{}", ran.stderr);
}
