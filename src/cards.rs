//! App Card packages on disk: reading a package directory for the checks in
//! `domain::card`, key files, and the author CLI (`switchboard card ...`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use clap::Subcommand;
use ed25519_dalek::SigningKey;

use crate::domain::card::{self, did_key, AppCard, CardError};

pub const MANIFEST: &str = "app.json";

/// A package as read from disk.
pub struct Package {
    pub app_json: Vec<u8>,
    /// Every regular file but `app.json`, by relative POSIX path.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Symbolic links found (refused by verification).
    pub symlinks: Vec<String>,
    /// Names that are not UTF-8 (refused as bad paths).
    pub unreadable_names: Vec<String>,
}

impl Package {
    /// Every check on this package as read (no second read of the disk).
    pub fn verify(&self) -> Result<AppCard, CardError> {
        if let Some(name) = self.unreadable_names.first() {
            return Err(CardError::BadPath(name.clone()));
        }
        card::verify(&self.app_json, &self.files, &self.symlinks)
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Package) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        // Names must be UTF-8: a lossy conversion could map two files to
        // one name and hide one of them from the integrity check.
        let parts = path
            .strip_prefix(root)?
            .components()
            .map(|c| c.as_os_str().to_str().map(str::to_string))
            .collect::<Option<Vec<_>>>();
        let Some(parts) = parts else {
            out.unreadable_names
                .push(path.to_string_lossy().into_owned());
            continue;
        };
        let rel = parts.join("/");
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            out.symlinks.push(rel);
        } else if meta.is_dir() {
            walk(root, &path, out)?;
        } else if meta.is_file() {
            if rel == MANIFEST {
                out.app_json = std::fs::read(&path)?;
            } else {
                out.files.insert(rel, std::fs::read(&path)?);
            }
        } else {
            anyhow::bail!("{rel} is neither a regular file nor a directory");
        }
    }
    Ok(())
}

pub fn read_package(dir: &Path) -> anyhow::Result<Package> {
    let mut p = Package {
        app_json: Vec::new(),
        files: BTreeMap::new(),
        symlinks: Vec::new(),
        unreadable_names: Vec::new(),
    };
    walk(dir, dir, &mut p)?;
    if p.app_json.is_empty() {
        anyhow::bail!("{} has no {MANIFEST}", dir.display());
    }
    Ok(p)
}

pub fn verify_dir(dir: &Path) -> anyhow::Result<Result<AppCard, CardError>> {
    Ok(read_package(dir)?.verify())
}

/// Key files hold the 32-byte Ed25519 secret in base64, readable by the
/// owner only.
pub fn write_key(path: &Path, key: &SigningKey) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(f, "{}", STANDARD.encode(key.to_bytes()))?;
    Ok(())
}

pub fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let text = std::fs::read_to_string(path)?;
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| anyhow::anyhow!("{} is not a key file", path.display()))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{} is not a key file", path.display()))?;
    Ok(SigningKey::from_bytes(&bytes))
}

#[derive(Subcommand)]
pub enum CardCommand {
    /// Make an Ed25519 key pair; print its did:key.
    Keygen {
        /// Where to write the secret key (created with mode 0600).
        #[arg(long)]
        out: PathBuf,
    },
    /// Compute entry.integrity, set author, and sign DIR/app.json in place.
    Sign {
        /// The package folder, holding app.json and its files.
        dir: PathBuf,
        /// The author's secret key file (from `card keygen`).
        #[arg(long)]
        key: PathBuf,
    },
    /// Run every check on a package.
    Verify {
        /// The package folder, holding app.json and its files.
        dir: PathBuf,
    },
    /// Verify, then write the package as a reproducible tar file.
    Pack {
        /// The package folder, holding app.json and its files.
        dir: PathBuf,
        /// The tar file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Verify a package (DIR) and record it in the hub's catalogue with its
    /// files; or, with --from, take the card ID from an exported catalogue
    /// signed by --trusted-signer (its files come with a package later).
    Install {
        /// A package directory, or a card id with --from.
        target: PathBuf,
        /// An exported catalogue file to take the card id from.
        #[arg(long, requires = "trusted_signer")]
        from: Option<PathBuf>,
        /// The did:key the catalogue must be signed by (with --from).
        #[arg(long, requires = "from")]
        trusted_signer: Option<String>,
        /// Accept a new version by a different author.
        #[arg(long)]
        force_author: bool,
    },
    /// The installed cards.
    List,
    /// Every installed version of one card, with its signed app.json.
    Show {
        /// The card's id (as `card list` prints it).
        id: String,
    },
    /// Write the catalogue as a file signed with the operator's key.
    Export {
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
        /// The operator's secret key file (from `card keygen`).
        #[arg(long)]
        key: PathBuf,
    },
    /// Import an exported catalogue signed by a trusted operator key.
    Import {
        /// The exported catalogue file.
        file: PathBuf,
        /// The did:key the catalogue must be signed by.
        #[arg(long)]
        trusted_signer: String,
        /// Accept new versions by a different author than the installed ones.
        #[arg(long)]
        force_author: bool,
    },
}

/// The catalogue commands, which need the hub's database.
pub async fn run_with_store(
    command: CardCommand,
    config: &crate::config::Config,
) -> anyhow::Result<()> {
    let needs_store = matches!(
        command,
        CardCommand::Install { .. }
            | CardCommand::List
            | CardCommand::Show { .. }
            | CardCommand::Export { .. }
            | CardCommand::Import { .. }
    );
    if !needs_store {
        return run(command);
    }
    let store = crate::store::open_existing(config).await?;
    match command {
        CardCommand::Install {
            target,
            from: None,
            force_author,
            ..
        } => install_dir(store.as_ref(), &target, force_author).await?,
        CardCommand::Install {
            target,
            from: Some(file),
            trusted_signer,
            force_author,
        } => {
            let id = target.to_string_lossy();
            let signer = trusted_signer.unwrap_or_default();
            let cards = import_only(
                store.as_ref(),
                &std::fs::read(&file)?,
                &signer,
                force_author,
                Some(&id),
            )
            .await?;
            for c in cards {
                println!(
                    "installed {} {} by {} from {}",
                    c.id,
                    c.version,
                    c.author,
                    file.display()
                );
            }
        }
        CardCommand::List => {
            for c in store.cards().await? {
                println!(
                    "{} {} {} [{}]",
                    c.id,
                    c.version,
                    c.author,
                    c.primitives.join(" ")
                );
            }
        }
        CardCommand::Show { id } => show(store.as_ref(), &id).await?,
        CardCommand::Export { out, key } => {
            let doc = export(store.as_ref(), &read_key(&key)?).await?;
            std::fs::write(&out, serde_json::to_string_pretty(&doc)? + "\n")?;
            println!(
                "exported {} card(s) to {}",
                doc["cards"].as_array().map_or(0, |a| a.len()),
                out.display()
            );
        }
        CardCommand::Import {
            file,
            trusted_signer,
            force_author,
        } => {
            let cards = import(
                store.as_ref(),
                &std::fs::read(&file)?,
                &trusted_signer,
                force_author,
            )
            .await?;
            println!("imported {} card(s)", cards.len());
        }
        _ => unreachable!("handled above"),
    }
    Ok(())
}

/// `card install DIR`: reads the package and installs it into the catalogue.
async fn install_dir(
    store: &(impl CardStore + ?Sized),
    dir: &Path,
    force_author: bool,
) -> anyhow::Result<()> {
    let p = read_package(dir)?;
    if let Some(name) = p.unreadable_names.first() {
        return Err(refused(CardError::BadPath(name.clone())));
    }
    let c = install(store, &p.app_json, &p.files, &p.symlinks, force_author).await?;
    println!("installed {} {} by {}", c.id, c.version, c.author);
    Ok(())
}

/// `card show ID`: every installed version of the card.
async fn show(store: &(impl CardStore + ?Sized), id: &str) -> anyhow::Result<()> {
    let versions: Vec<_> = store
        .cards()
        .await?
        .into_iter()
        .filter(|c| c.id == id)
        .collect();
    if versions.is_empty() {
        anyhow::bail!("no card {id:?} is installed");
    }
    for c in versions {
        let v: Value = serde_json::from_str(&c.card_json)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

pub fn run(command: CardCommand) -> anyhow::Result<()> {
    match command {
        CardCommand::Keygen { out } => {
            let key = SigningKey::generate(&mut rand::rngs::OsRng);
            write_key(&out, &key)?;
            println!("{}", did_key::encode(&key.verifying_key()));
            Ok(())
        }
        CardCommand::Sign { dir, key } => {
            let key = read_key(&key)?;
            let p = read_package(&dir)?;
            if let Some(link) = p.symlinks.first() {
                return Err(refused(CardError::Symlink(link.clone())));
            }
            if let Some(name) = p.unreadable_names.first() {
                return Err(refused(CardError::BadPath(name.clone())));
            }
            let doc = card::strict::parse(&p.app_json).map_err(refused)?;
            let signed = card::sign(&doc, &p.files, &key).map_err(refused)?;
            let mut text = serde_json::to_string_pretty(&signed)?;
            text.push('\n');
            std::fs::write(dir.join(MANIFEST), text)?;
            println!("signed by {}", did_key::encode(&key.verifying_key()));
            Ok(())
        }
        CardCommand::Verify { dir } => {
            let c = verify_dir(&dir)?.map_err(refused)?;
            println!("ok {} {} by {}", c.id, c.version, c.author);
            Ok(())
        }
        CardCommand::Pack { dir, out } => {
            // Verify exactly the bytes that get packed.
            let p = read_package(&dir)?;
            let c = p.verify().map_err(refused)?;
            let mut builder = tar::Builder::new(std::fs::File::create(&out)?);
            let mut entries: Vec<(String, Vec<u8>)> = p.files.into_iter().collect();
            entries.push((MANIFEST.to_string(), p.app_json));
            entries.sort();
            for (path, bytes) in entries {
                let mut header = tar::Header::new_gnu();
                header.set_size(bytes.len() as u64);
                header.set_mode(0o644);
                header.set_mtime(0);
                header.set_uid(0);
                header.set_gid(0);
                header.set_cksum();
                builder.append_data(&mut header, &path, bytes.as_slice())?;
            }
            builder.finish()?;
            println!("packed {} {} into {}", c.id, c.version, out.display());
            Ok(())
        }
        CardCommand::Install { .. }
        | CardCommand::List
        | CardCommand::Show { .. }
        | CardCommand::Export { .. }
        | CardCommand::Import { .. } => {
            anyhow::bail!("this command needs the hub's database (run_with_store)")
        }
    }
}

/// A refused card: the error's code first, so scripts can match on it.
fn refused(e: CardError) -> anyhow::Error {
    anyhow::anyhow!("card refused ({}): {e}", e.code())
}

// ---- the catalogue ----

use serde_json::{json, Value};

use crate::store::{CardRecord, CardStore, StoreError};

pub const CATALOGUE_SCHEMA: &str = "switchboard/catalogue/1";

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("card refused ({code}): {0}", code = .0.code())]
    Card(#[from] CardError),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(StoreError),
}

fn record_of(card: &AppCard, value: &Value) -> CardRecord {
    CardRecord {
        id: card.id.clone(),
        version: card.version.clone(),
        author: card.author.clone(),
        primitives: card.primitives.clone(),
        integrity: card.entry.integrity.clone(),
        card_json: serde_json_canonicalizer::to_string(value).expect("a JSON value canonicalizes"),
        installed_at: crate::domain::now_millis(),
    }
}

async fn record(
    store: &(impl CardStore + ?Sized),
    card: &AppCard,
    value: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    force_author: bool,
) -> Result<(), InstallError> {
    // Signed and valid, but not a policy this hub can keep (ADR 0031 §9).
    if card.reply_policy == crate::domain::card::ReplyPolicy::Metered {
        return Err(CardError::ReplyPolicyNotDefined.into());
    }
    store
        .install_card_with_files(&record_of(card, value), files, force_author)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(m) => InstallError::Conflict(m),
            other => InstallError::Store(other),
        })
}

/// Verifies a package completely (files included) and records it with its
/// files, which a hosted run reads back (ADR 0031 §1).
pub async fn install(
    store: &(impl CardStore + ?Sized),
    app_json: &[u8],
    files: &BTreeMap<String, Vec<u8>>,
    symlinks: &[String],
    force_author: bool,
) -> Result<AppCard, InstallError> {
    let card = card::verify(app_json, files, symlinks)?;
    let (_, value) = card::parse(app_json)?;
    record(store, &card, &value, files, force_author).await?;
    Ok(card)
}

/// The catalogue as a file another hub can import: every card, signed by the
/// operator's key over the canonical form without `sig`.
pub async fn export(store: &(impl CardStore + ?Sized), key: &SigningKey) -> anyhow::Result<Value> {
    use ed25519_dalek::Signer;
    let cards: Vec<Value> = store
        .cards()
        .await?
        .iter()
        .map(|c| serde_json::from_str(&c.card_json))
        .collect::<Result<_, _>>()?;
    let mut doc = json!({
        "schema": CATALOGUE_SCHEMA,
        "signer": did_key::encode(&key.verifying_key()),
        "cards": cards,
    });
    let sig = key.sign(&card::canonical_bytes(&doc));
    doc["sig"] = json!(STANDARD.encode(sig.to_bytes()));
    Ok(doc)
}

/// Imports an exported catalogue: its signature, then each card's own
/// signature and rules (the files stay pinned by each card's integrity map;
/// they are checked when a package is installed or run).
/// Only a catalogue signed by `trusted_signer` is accepted; the signer the
/// file names proves nothing by itself.
pub async fn import(
    store: &(impl CardStore + ?Sized),
    bytes: &[u8],
    trusted_signer: &str,
    force_author: bool,
) -> Result<Vec<AppCard>, InstallError> {
    import_only(store, bytes, trusted_signer, force_author, None).await
}

/// [`import`] of the cards of one id only (`card install ID --from
/// CATALOGUE`, every version of it the catalogue holds, in its order): the
/// catalogue's signature is checked whole, then each card of that id as
/// on import; no card of that id is a `Conflict` naming it.
pub async fn import_only(
    store: &(impl CardStore + ?Sized),
    bytes: &[u8],
    trusted_signer: &str,
    force_author: bool,
    only: Option<&str>,
) -> Result<Vec<AppCard>, InstallError> {
    let doc = card::strict::parse(bytes)?;
    if doc.get("schema") != Some(&json!(CATALOGUE_SCHEMA)) {
        return Err(CardError::Schema(format!(
            "a catalogue's schema must be {CATALOGUE_SCHEMA:?}"
        ))
        .into());
    }
    let signer = doc
        .get("signer")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if signer != trusted_signer {
        return Err(CardError::BadSignature.into());
    }
    let key = did_key::decode(signer).ok_or_else(|| CardError::BadAuthor(signer.to_string()))?;
    let sig = doc
        .get("sig")
        .and_then(Value::as_str)
        .and_then(|s| STANDARD.decode(s).ok())
        .and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok())
        .ok_or(CardError::BadSignature)?;
    key.verify_strict(&card::canonical_bytes(&doc), &sig)
        .map_err(|_| CardError::BadSignature)?;
    let mut out = Vec::new();
    for value in doc
        .get("cards")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if only.is_some_and(|id| value.get("id").and_then(Value::as_str) != Some(id)) {
            continue;
        }
        let bytes = serde_json::to_vec(&value).expect("serializes");
        let (c, v) = card::parse(&bytes)?;
        card::verify_signature(&c, &v)?;
        record(store, &c, &v, &BTreeMap::new(), force_author).await?;
        out.push(c);
    }
    match only {
        Some(id) if out.is_empty() => Err(InstallError::Conflict(format!(
            "the catalogue holds no card {id:?}"
        ))),
        _ => Ok(out),
    }
}
