//! App Cards: `schemas/app-card.schema.json` against the hub's card parser
//! (`card::parse`, what `switchboard card verify` and the catalogue run
//! before the author, signature and file checks, which need a package).

use serde_json::{json, Value};
use switchboard::domain::card;

use super::Verdict::{HubOnly, Invalid, Valid};
use super::{case, chars, judge, validator, with, without, Case};

const HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

fn base() -> Value {
    json!({
        "schema": "muretai/app/1",
        "id": "werewolf",
        "name": "Werewolf",
        "tagline": "A game of hidden roles",
        "description": "Agents play Werewolf",
        "version": "1.0.0",
        "category": "game",
        "primitives": ["send_message", "rooms"],
        "entry": { "readme": "README.md", "integrity": { "README.md": HASH } },
        "coreChanges": false,
        "author": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
    })
}

fn corpus() -> Vec<Case> {
    let b = base();
    let mut out = vec![
        case("base", b.clone(), Valid),
        case(
            "schema other",
            with(&b, "/schema", json!("muretai/app/2")),
            Invalid,
        ),
        case("id 64", with(&b, "/id", json!(chars('a', 64))), Valid),
        case("id 65", with(&b, "/id", json!(chars('a', 65))), Invalid),
        case("id empty", with(&b, "/id", json!("")), Invalid),
        case("id a-1", with(&b, "/id", json!("a-1")), Valid),
        case("id leading -", with(&b, "/id", json!("-a")), Invalid),
        case("id uppercase", with(&b, "/id", json!("Wolf")), Invalid),
        case("id underscore", with(&b, "/id", json!("a_b")), Invalid),
        case(
            "coreChanges true",
            with(&b, "/coreChanges", json!(true)),
            Invalid,
        ),
        case(
            "primitive unknown",
            with(&b, "/primitives", json!(["teleport"])),
            Invalid,
        ),
        case(
            "category other",
            with(&b, "/category", json!("sports")),
            Invalid,
        ),
        case("missing author", without(&b, "/author"), Invalid),
        case("unknown member", with(&b, "/extra", json!(1)), Invalid),
        case(
            "entry unknown member",
            with(&b, "/entry/extra", json!(1)),
            Invalid,
        ),
        case(
            "readme not in integrity",
            with(&b, "/entry/readme", json!("OTHER.md")),
            HubOnly,
        ),
    ];
    for (v, verdict) in [
        ("1.0.0", Valid),
        ("0.1.0-rc.1+build.05", Valid),
        ("1.0", Invalid),
        ("01.0.0", Invalid),
        ("1.0.0-01", Invalid),
        ("v1.0.0", Invalid),
    ] {
        out.push(case(
            format!("version {v}"),
            with(&b, "/version", json!(v)),
            verdict,
        ));
    }
    for (hash, verdict) in [
        (HASH.to_string(), Valid),
        (HASH.replace("sha256:", "sha512:"), Invalid),
        (format!("{HASH}0"), Invalid),
        (HASH.replace('0', "A"), Invalid),
    ] {
        let doc = with(&b, "/entry/integrity/README.md", json!(hash));
        out.push(case(format!("integrity value {hash}"), doc, verdict));
    }
    for (path, verdict) in [
        ("docs/a.md", Valid),
        ("...", Valid),
        (".hidden/x", Valid),
        ("/abs", Invalid),
        ("a//b", Invalid),
        ("a/./b", Invalid),
        ("a/../b", Invalid),
        ("a\\b", Invalid),
        ("a/", Invalid),
    ] {
        let integrity = json!({ "README.md": HASH, path: HASH });
        let doc = with(&b, "/entry/integrity", integrity);
        out.push(case(format!("integrity path {path}"), doc, verdict));
    }
    out
}

#[test]
fn cards_agree_with_the_hub_parser_on_every_case() {
    let schema = validator("app-card.schema.json");
    let corpus = corpus();
    let problems: Vec<String> = corpus
        .iter()
        .filter_map(|c| {
            let bytes = serde_json::to_vec(&c.doc).expect("serializes");
            judge(c, schema.is_valid(&c.doc), card::parse(&bytes).is_ok())
        })
        .collect();
    eprintln!("schema agreement: {} card cases", corpus.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
