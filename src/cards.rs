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
}

fn walk(root: &Path, dir: &Path, out: &mut Package) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
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
    };
    walk(dir, dir, &mut p)?;
    if p.app_json.is_empty() {
        anyhow::bail!("{} has no {MANIFEST}", dir.display());
    }
    Ok(p)
}

pub fn verify_dir(dir: &Path) -> anyhow::Result<Result<AppCard, CardError>> {
    let p = read_package(dir)?;
    Ok(card::verify(&p.app_json, &p.files, &p.symlinks))
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
        dir: PathBuf,
        #[arg(long)]
        key: PathBuf,
    },
    /// Run every check on a package.
    Verify { dir: PathBuf },
    /// Verify, then write the package as a reproducible tar file.
    Pack {
        dir: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
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
            let c = verify_dir(&dir)?.map_err(refused)?;
            let p = read_package(&dir)?;
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
    }
}

/// A refused card: the error's code first, so scripts can match on it.
fn refused(e: CardError) -> anyhow::Error {
    anyhow::anyhow!("card refused ({}): {e}", e.code())
}
