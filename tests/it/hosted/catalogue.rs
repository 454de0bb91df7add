//! `card install ID --from CATALOGUE` (issue 18 part 7): one card taken by
//! id from a signed, exported catalogue, checked against a trusted signer;
//! its files come with a package later, and until then its run is refused
//! `package_missing`.

use super::{card, cli_sync, install, run};

#[tokio::test]
async fn a_card_is_installed_by_id_from_a_signed_catalogue() {
    let c = card(
        "from-cat",
        &["whoami"],
        "from sb import out, text\nout(me=text('whoami'))\n",
        &[],
    );
    let other = card("other-cat", &["whoami"], "print('other')\n", &[]);
    let hub_a = c.root.path().join("hub-a");
    install(&c, &hub_a);
    install(&other, &hub_a);
    let operator = c.root.path().join("operator.key");
    let (ok, did, err) = cli_sync(&["card", "keygen", "--out", operator.to_str().unwrap()]);
    assert!(ok, "{err}");
    let export = c.root.path().join("catalogue.json");
    let (ok, _, err) = cli_sync(&[
        "card",
        "export",
        "--out",
        export.to_str().unwrap(),
        "--key",
        operator.to_str().unwrap(),
        "--data-dir",
        hub_a.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let hub_b = c.root.path().join("hub-b");
    crate::support::migrate(&hub_b, None);
    let install_from = |id: &str, signer: &str| {
        cli_sync(&[
            "card",
            "install",
            id,
            "--from",
            export.to_str().unwrap(),
            "--trusted-signer",
            signer,
            "--data-dir",
            hub_b.to_str().unwrap(),
        ])
    };
    // Another signer's word is not the operator's.
    let stranger = c.root.path().join("stranger.key");
    let (_, stranger_did, _) = cli_sync(&["card", "keygen", "--out", stranger.to_str().unwrap()]);
    let (ok, _, err) = install_from("from-cat", stranger_did.trim());
    assert!(!ok && err.contains("bad_signature"), "{err}");
    let (ok, _, err) = install_from("missing-id", did.trim());
    assert!(!ok && err.contains("holds no card \"missing-id\""), "{err}");
    let (ok, out, err) = install_from("from-cat", did.trim());
    assert!(
        ok && out.starts_with("installed from-cat 1.0.0"),
        "{out}{err}"
    );
    let (_, list, _) = cli_sync(&["card", "list", "--data-dir", hub_b.to_str().unwrap()]);
    assert!(
        list.contains("from-cat") && !list.contains("other-cat"),
        "{list}"
    );
    // The catalogue carries no files: the run waits for the package.
    let ran = run("from-cat", &hub_b, &[]).await;
    assert!(
        ran.stderr.contains("run refused (package_missing)"),
        "{}",
        ran.stderr
    );
    install(&c, &hub_b);
    let ran = run("from-cat", &hub_b, &[]).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(ran.line("me")["me"]["cardId"], "from-cat");
}
