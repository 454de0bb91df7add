//! Signed App Cards: the `muretai/app/1` manifest of an app the hub can host.
//!
//! A card is trusted only if every check passes: the schema (unknown members
//! and duplicate keys refused), `coreChanges == false`, an Ed25519 `did:key`
//! author, a signature over the RFC 8785 canonical form of the card without
//! `sig`, and a per-file sha256 for exactly the files of the package. Each
//! check fails with its own code. This module is pure: the caller reads the
//! package (see `crate::cards`) and hands over its files.

pub mod did_key;
pub mod primitives;
pub mod strict;

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub const SCHEMA: &str = "muretai/app/1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Game,
    Social,
    Productivity,
    Commerce,
    Creative,
    Utility,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A package path (see `integrity`) the integrity map lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN))]
    pub readme: Option<String>,
    /// A package path the integrity map lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN))]
    pub persona: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beatless_prompt: Option<String>,
    #[serde(default)]
    pub kickoff: Vec<String>,
    /// A package path the integrity map lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN))]
    pub stage: Option<String>,
    /// Package paths the integrity map lists.
    #[serde(default)]
    #[schemars(inner(regex(pattern = PATH_PATTERN)))]
    pub scripts: Vec<String>,
    /// A package path the integrity map lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN))]
    pub wasm: Option<String>,
    /// `"<relative POSIX path>": "sha256:<lowercase hex>"` for every file of
    /// the package but `app.json`. A path has no leading `/`, no `\\`, no
    /// NUL, and no empty, `.` or `..` segment.
    #[schemars(extend(
        "propertyNames" = {"pattern": PATH_PATTERN},
        "additionalProperties" = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
    ))]
    pub integrity: BTreeMap<String, String>,
}

/// One segment of a package path: not empty, `.` or `..`, without `/`, `\`
/// or NUL.
macro_rules! path_segment {
    () => {
        r"(?:[^/\\\u0000.][^/\\\u0000]*|\.[^/\\\u0000.][^/\\\u0000]*|\.\.[^/\\\u0000]+)"
    };
}

/// A package path as [`check_path`] accepts it, as a JSON Schema pattern.
const PATH_PATTERN: &str = concat!("^", path_segment!(), "(?:/", path_segment!(), ")*$");

/// An `id`: lowercase letters, digits and `-`, not starting with `-`.
const ID_PATTERN: &str = "^[a-z0-9][a-z0-9-]*$";

/// A semantic version (semver.org's pattern, which the `semver` crate
/// follows).
const VERSION_PATTERN: &str = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$";

/// The allowlisted primitives as the schema's `items`.
fn primitives_items(schema: &mut schemars::Schema) {
    let names: Vec<&str> = primitives::VERBS
        .iter()
        .chain(primitives::FEATURES.iter())
        .copied()
        .collect();
    schema.insert("items".into(), serde_json::json!({"enum": names}));
}

/// The card as `app.json` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppCard {
    #[schemars(extend("const" = SCHEMA))]
    pub schema: String,
    /// 1 to 64 of lowercase letters, digits and `-`, not starting with `-`.
    #[schemars(length(min = 1, max = 64), regex(pattern = ID_PATTERN))]
    pub id: String,
    pub name: String,
    pub tagline: String,
    pub description: String,
    /// Semantic version.
    #[schemars(regex(pattern = VERSION_PATTERN))]
    pub version: String,
    pub category: Category,
    /// Names from the hub's allowlist.
    #[schemars(transform = primitives_items)]
    pub primitives: Vec<String>,
    pub entry: Entry,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub requires: serde_json::Map<String, Value>,
    /// Must be false: an app never patches the core.
    #[serde(rename = "coreChanges")]
    #[schemars(extend("const" = false))]
    pub core_changes: bool,
    /// `did:key:z6Mk...` of the Ed25519 key that signed the card.
    #[schemars(regex(pattern = "^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]+$"))]
    pub author: String,
    /// Base64 Ed25519 signature over the canonical card without `sig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    /// Who may message the app (seed 003, ADR 0031 §9); signed with the
    /// card like every member. Absent means `all`.
    #[serde(default, skip_serializing_if = "ReplyPolicy::is_all")]
    pub reply_policy: ReplyPolicy,
}

/// The app's own door: `all` lets anyone request its tasks, `members` only
/// principals who share a room with it, and `metered` is not defined yet
/// (the seed leaves its economics open): such a card is refused at install.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplyPolicy {
    #[default]
    All,
    Members,
    Metered,
}

impl ReplyPolicy {
    pub fn is_all(&self) -> bool {
        *self == ReplyPolicy::All
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReplyPolicy::All => "all",
            ReplyPolicy::Members => "members",
            ReplyPolicy::Metered => "metered",
        }
    }

    pub fn parse(s: &str) -> Option<ReplyPolicy> {
        [ReplyPolicy::All, ReplyPolicy::Members, ReplyPolicy::Metered]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// Why a card is refused. `code()` is stable; the message names the field or
/// file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    #[error("app.json is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("duplicate key at {0} in app.json")]
    DuplicateKey(String),
    #[error("app.json does not match the schema: {0}")]
    Schema(String),
    #[error("schema must be \"muretai/app/1\"")]
    WrongSchema,
    #[error("version {0:?} is not a semantic version")]
    InvalidVersion(String),
    #[error("coreChanges must be false: an app never patches the core")]
    CoreChanges,
    #[error("id {0:?} must be 1 to 64 lowercase letters, digits or '-', starting with a letter or digit")]
    InvalidId(String),
    #[error("entry.{0} names {1:?}, which is not a file listed in integrity")]
    UnlistedEntry(&'static str, String),
    #[error("unknown primitive {0:?}")]
    UnknownPrimitive(String),
    #[error("author {0:?} is not an Ed25519 did:key")]
    BadAuthor(String),
    #[error("the card is not signed (sig is missing)")]
    Unsigned,
    #[error("the signature does not verify for the author over the canonical card")]
    BadSignature,
    #[error("path {0:?} is not a relative POSIX path inside the package")]
    BadPath(String),
    #[error("{0:?} is a symbolic link; packages hold regular files only")]
    Symlink(String),
    #[error("integrity value for {0:?} must be \"sha256:\" and 64 lowercase hex digits")]
    BadIntegrityValue(String),
    #[error("file {0:?} does not match its integrity hash")]
    IntegrityMismatch(String),
    #[error("file {0:?} is listed in integrity but missing from the package")]
    MissingFile(String),
    #[error("file {0:?} is in the package but not listed in integrity")]
    UnlistedFile(String),
    #[error("reply_policy metered is not defined yet: the seed leaves its economics open")]
    ReplyPolicyNotDefined,
}

impl CardError {
    pub fn code(&self) -> &'static str {
        match self {
            CardError::InvalidJson(_) => "invalid_json",
            CardError::DuplicateKey(_) => "duplicate_key",
            CardError::Schema(_) => "invalid_schema",
            CardError::WrongSchema => "wrong_schema",
            CardError::InvalidVersion(_) => "invalid_version",
            CardError::CoreChanges => "core_changes",
            CardError::InvalidId(_) => "invalid_id",
            CardError::UnlistedEntry(..) => "unlisted_entry",
            CardError::UnknownPrimitive(_) => "unknown_primitive",
            CardError::BadAuthor(_) => "bad_author",
            CardError::Unsigned => "unsigned",
            CardError::BadSignature => "bad_signature",
            CardError::BadPath(_) => "bad_path",
            CardError::Symlink(_) => "symlink",
            CardError::BadIntegrityValue(_) => "bad_integrity_value",
            CardError::IntegrityMismatch(_) => "integrity_mismatch",
            CardError::MissingFile(_) => "missing_file",
            CardError::UnlistedFile(_) => "unlisted_file",
            CardError::ReplyPolicyNotDefined => "reply_policy_not_defined",
        }
    }
}

/// Parses `app.json`: duplicate keys and unknown members are refused, then
/// the field rules are checked (everything but signature and files).
pub fn parse(bytes: &[u8]) -> Result<(AppCard, Value), CardError> {
    let value = strict::parse(bytes)?;
    let card: AppCard = serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        CardError::Schema(if path == "." {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        })
    })?;
    if card.schema != SCHEMA {
        return Err(CardError::WrongSchema);
    }
    let id_ok = !card.id.is_empty()
        && card.id.len() <= 64
        && card
            .id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !card.id.starts_with('-');
    if !id_ok {
        return Err(CardError::InvalidId(card.id.clone()));
    }
    semver::Version::parse(&card.version)
        .map_err(|_| CardError::InvalidVersion(card.version.clone()))?;
    if card.core_changes {
        return Err(CardError::CoreChanges);
    }
    for p in &card.primitives {
        if !primitives::is_allowed(p) {
            return Err(CardError::UnknownPrimitive(p.clone()));
        }
    }
    // Entry fields that name files must name files the integrity map pins
    // (kickoff lines and the beatless prompt are text, not files).
    let e = &card.entry;
    let named = [
        ("readme", &e.readme),
        ("persona", &e.persona),
        ("stage", &e.stage),
        ("wasm", &e.wasm),
    ];
    let scripts = e.scripts.iter().map(|s| ("scripts", s));
    for (field, path) in named
        .iter()
        .filter_map(|(f, p)| p.as_ref().map(|p| (*f, p)))
        .chain(scripts)
    {
        check_path(path)?;
        if !e.integrity.contains_key(path) {
            return Err(CardError::UnlistedEntry(field, path.clone()));
        }
    }
    for (path, hash) in &card.entry.integrity {
        check_path(path)?;
        let hex = hash.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(CardError::BadIntegrityValue(path.clone()));
        }
    }
    Ok((card, value))
}

/// A package path: relative, POSIX separators, no `..`, no empty parts.
pub fn check_path(path: &str) -> Result<(), CardError> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains('\0')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        Err(CardError::BadPath(path.to_string()))
    } else {
        Ok(())
    }
}

/// The bytes that are signed: the RFC 8785 canonical form of the card
/// without `sig`.
pub fn canonical_bytes(card: &Value) -> Vec<u8> {
    let mut unsigned = card.clone();
    if let Value::Object(map) = &mut unsigned {
        map.remove("sig");
    }
    serde_json_canonicalizer::to_vec(&unsigned).expect("a JSON value canonicalizes")
}

pub fn file_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Checks the author and the signature over the canonical bytes.
pub fn verify_signature(card: &AppCard, value: &Value) -> Result<(), CardError> {
    let key =
        did_key::decode(&card.author).ok_or_else(|| CardError::BadAuthor(card.author.clone()))?;
    let sig = card.sig.as_deref().ok_or(CardError::Unsigned)?;
    let sig = STANDARD.decode(sig).map_err(|_| CardError::BadSignature)?;
    let sig = ed25519_dalek::Signature::from_slice(&sig).map_err(|_| CardError::BadSignature)?;
    // Strict: refuses small-order keys and malleable signatures.
    key.verify_strict(&canonical_bytes(value), &sig)
        .map_err(|_| CardError::BadSignature)
}

/// Checks the package's files against `entry.integrity`: every listed file
/// present with its hash, no unlisted file, no symlink. `files` maps every
/// regular file but `app.json` to its bytes; `symlinks` lists the links found.
pub fn verify_files(
    card: &AppCard,
    files: &BTreeMap<String, Vec<u8>>,
    symlinks: &[String],
) -> Result<(), CardError> {
    if let Some(link) = symlinks.first() {
        return Err(CardError::Symlink(link.clone()));
    }
    for (path, expected) in &card.entry.integrity {
        let bytes = files
            .get(path)
            .ok_or_else(|| CardError::MissingFile(path.clone()))?;
        if &file_hash(bytes) != expected {
            return Err(CardError::IntegrityMismatch(path.clone()));
        }
    }
    for path in files.keys() {
        check_path(path)?;
        if !card.entry.integrity.contains_key(path) {
            return Err(CardError::UnlistedFile(path.clone()));
        }
    }
    Ok(())
}

/// Every check, in order: schema, fields, author, signature, files.
pub fn verify(
    app_json: &[u8],
    files: &BTreeMap<String, Vec<u8>>,
    symlinks: &[String],
) -> Result<AppCard, CardError> {
    let (card, value) = parse(app_json)?;
    verify_signature(&card, &value)?;
    verify_files(&card, files, symlinks)?;
    Ok(card)
}

/// Sets `integrity` from the files, `author` from the key, and signs.
/// Returns the signed `app.json` value.
pub fn sign(
    card_doc: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    key: &SigningKey,
) -> Result<Value, CardError> {
    let mut doc = card_doc.clone();
    let integrity: serde_json::Map<String, Value> = files
        .iter()
        .map(|(path, bytes)| {
            check_path(path).map(|_| (path.clone(), Value::String(file_hash(bytes))))
        })
        .collect::<Result<_, _>>()?;
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| CardError::Schema("app.json must be an object".into()))?;
    obj.remove("sig");
    obj.insert(
        "author".into(),
        Value::String(did_key::encode(&key.verifying_key())),
    );
    let entry = obj
        .entry("entry")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
        .ok_or_else(|| CardError::Schema("entry must be an object".into()))?;
    entry.insert("integrity".into(), Value::Object(integrity));
    // Refuse to sign what would not verify.
    let bytes = serde_json::to_vec(&doc).expect("serializes");
    parse(&bytes)?;
    let sig = key.sign(&canonical_bytes(&doc));
    doc.as_object_mut()
        .expect("object")
        .insert("sig".into(), Value::String(STANDARD.encode(sig.to_bytes())));
    Ok(doc)
}
