//! `get_persona`, `set_persona` and `set_profile` (ADR 0031 §6) through the
//! real runner: the card's persona file until the app sets one, a reset
//! back to it, the bounds from config, and a profile that `whoami` shows
//! and a later run still has.

use serde_json::json;

use super::{card, card_with, install, run};

const PERSONA: &str = r#"
from sb import call, out, text
out(first=text("get_persona"))
out(who=text("whoami"))
out(set=text("set_persona", {"persona": "a stern dealer"}))
out(second=text("get_persona"))
out(big=call("set_persona", {"persona": "x" * 33}))
out(missing=call("set_persona", {}))
out(profile=text("set_profile", {"name": "Dealer"}))
out(blank=call("set_profile", {"name": " "}))
out(extra=call("set_profile", {"name": "D", "avatar": "x"}))
out(huge=call("set_profile", {"description": "d" * 80}))
out(who_after=text("whoami"))
"#;

const LATER: &str = r#"
from sb import out, text
out(kept=text("get_persona"))
out(who=text("whoami"))
out(reset=text("set_persona", {"persona": None}))
out(back=text("get_persona"))
"#;

#[tokio::test]
async fn the_persona_defaults_to_the_cards_file_and_the_profile_to_its_name() {
    let env = [
        ("SWITCHBOARD_HOSTED__PERSONA_MAX_BYTES", "32"),
        ("SWITCHBOARD_HOSTED__PROFILE_MAX_BYTES", "64"),
    ];
    let prims = ["whoami", "persona", "set_profile"];
    let entry =
        json!({"entry": {"scripts": ["main.py"], "persona": "persona.md", "integrity": {}}});
    let c = card_with(
        "persona",
        &prims,
        PERSONA,
        &[("persona.md", "You deal the cards.\n")],
        entry.clone(),
        None,
    );
    install(&c, &c.data());
    let ran = run("persona", &c.data(), &env).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    let l = |k: &str| ran.line(k)[k].clone();
    assert_eq!(
        l("first"),
        json!({"persona": "You deal the cards.\n", "source": "card"})
    );
    assert_eq!(
        l("who")["profile"],
        json!({"name": "Test persona", "description": "a hosted test app"}),
        "the card's name and tagline until one is set"
    );
    assert_eq!(l("set")["stored"], true);
    assert_eq!(
        l("second"),
        json!({"persona": "a stern dealer", "source": "set"})
    );
    for (k, field) in [
        ("big", "hosted.persona_max_bytes"),
        ("missing", "persona"),
        ("blank", "params.name"),
        ("extra", "avatar"),
        ("huge", "hosted.profile_max_bytes"),
    ] {
        assert_eq!(l(k)["error"], "bad_request", "{k}: {}", l(k));
        assert!(
            l(k)["message"].as_str().unwrap().contains(field),
            "{k}: {}",
            l(k)
        );
    }
    assert_eq!(
        l("profile")["profile"],
        json!({"name": "Dealer", "description": "a hosted test app"})
    );
    assert_eq!(l("who_after")["profile"]["name"], "Dealer");

    // A later run of the same card: the app's persona and profile are kept;
    // a reset goes back to the card's file.
    let later = card_with(
        "persona",
        &prims,
        LATER,
        &[("persona.md", "You deal the cards.\n")],
        json!({"version": "1.0.1", "entry": entry["entry"]}),
        Some(&c.root.path().join("author.key")),
    );
    install(&later, &c.data());
    let ran = run("persona", &c.data(), &env).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    let l = |k: &str| ran.line(k)[k].clone();
    assert_eq!(l("kept")["persona"], "a stern dealer");
    assert_eq!(l("who")["profile"]["name"], "Dealer");
    assert_eq!(
        l("back"),
        json!({"persona": "You deal the cards.\n", "source": "card"})
    );
}

const NO_FILE: &str = r#"
from sb import call, out, text
out(none=text("get_persona"))
out(denied=call("set_profile", {"name": "x"}))
"#;

#[tokio::test]
async fn a_card_without_a_persona_file_has_none_and_set_profile_needs_its_grant() {
    let c = card("nopersona", &["persona"], NO_FILE, &[]);
    install(&c, &c.data());
    let ran = run("nopersona", &c.data(), &[]).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.line("none")["none"],
        json!({"persona": null, "source": "none"})
    );
    assert_eq!(ran.line("denied")["denied"]["error"], "capability_denied");
}
