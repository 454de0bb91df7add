//! The hub's database, as an operator command (`cli`, `cards`) opens it: the one `serve`
//! uses, found through the same configuration (`--config`, the
//! environment, `--data-dir`, `--database-url`), and never created here.
//! A command run in another folder used to make a fresh `./switchboard-data`
//! and print a key the running hub had never seen; now it says where it
//! looked and how to point it at the hub's.

use std::path::PathBuf;
use std::str::FromStr;

use super::DynStore;
use crate::config::Config;

/// The SQLite file a `sqlite:` URL names, made absolute (`None` for
/// another backend or an in-memory database).
fn sqlite_file(url: &str) -> Option<PathBuf> {
    if !url.starts_with("sqlite:") {
        return None;
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" {
        return None;
    }
    Some(std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()))
}

/// The database URL as it may be shown: without a password.
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

fn how_to_point() -> &'static str {
    "Operator commands read the configuration `serve` reads and never create a database. \
     Point them at the hub's: the file the hub runs with (--config FILE or SWITCHBOARD_CONFIG), \
     or --data-dir DIR / --database-url URL (SWITCHBOARD_SERVER__DATA_DIR, \
     SWITCHBOARD_STORAGE__DATABASE_URL) as given to `serve`. \
     `switchboard migrate` (or `serve`) creates a new database."
}

/// Opens the hub's database for an operator command, or says why not.
pub async fn open_existing(config: &Config) -> anyhow::Result<DynStore> {
    let url = config.database_url();
    let whence = if config.storage.database_url.is_empty() {
        format!(
            "server.data_dir = {}, storage.database_url unset",
            config.server.data_dir.display()
        )
    } else {
        "storage.database_url".to_string()
    };
    if let Some(file) = sqlite_file(&url) {
        if !file.is_file() {
            anyhow::bail!(
                "no switchboard database at {} (from {whence}). {}",
                file.display(),
                how_to_point()
            );
        }
    }
    let store = super::open_unmigrated(config).await?;
    if store.sync_epoch().await.is_err() {
        anyhow::bail!(
            "{} holds no switchboard database (from {whence}). {}",
            shown(&url),
            how_to_point()
        );
    }
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_of_a_sqlite_url_is_found_and_a_password_is_never_shown() {
        let file = sqlite_file("sqlite:///var/lib/sb/switchboard.db").unwrap();
        assert_eq!(file, PathBuf::from("/var/lib/sb/switchboard.db"));
        let relative = sqlite_file("sqlite://data/switchboard.db").unwrap();
        assert!(relative.is_absolute() && relative.ends_with("data/switchboard.db"));
        assert_eq!(sqlite_file("postgres://u@h/db"), None);
        let url = shown("postgres://user:secret@db.example/sb");
        assert!(
            !url.contains("secret") && url.contains("user:***@db.example"),
            "{url}"
        );
    }
}
