//! A throwaway PostgreSQL for `--backend postgres` without `--postgres-url`
//! and for the test suite: started from the server binaries on this machine
//! on a free loopback port, stopped and removed by [`stop`]. As root it runs
//! as the `postgres` user (initdb refuses root).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

struct Running {
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

static SERVER: Mutex<Option<Running>> = Mutex::new(None);

fn binary(name: &str) -> anyhow::Result<PathBuf> {
    if let Ok(out) = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
    {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            return Ok(PathBuf::from(p));
        }
    }
    for dir in std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
    {
        let c = dir.path().join("bin").join(name);
        if c.exists() {
            return Ok(c);
        }
    }
    anyhow::bail!("{name} not found: install the PostgreSQL server binaries or pass --postgres-url")
}

fn run(
    as_postgres: bool,
    program: &PathBuf,
    args: &[&str],
) -> anyhow::Result<std::process::Output> {
    let mut cmd = if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    Ok(cmd.args(args).output()?)
}

/// initdb and pg_ctl start in a fresh temporary directory, on a free port
/// of 127.0.0.1 (as the `postgres` user when we are root).
fn start() -> anyhow::Result<Running> {
    let as_postgres = unsafe { libc::geteuid() } == 0;
    let dir = std::env::temp_dir().join(format!("switchboard-bench-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    if as_postgres {
        Command::new("chown")
            .arg("-R")
            .arg("postgres")
            .arg(&dir)
            .status()?;
    }
    let data = dir.join("data");
    let out = run(
        as_postgres,
        &binary("initdb")?,
        &[
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
    )?;
    anyhow::ensure!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let opts = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
        dir.display()
    );
    let log = dir.join("pg.log");
    let out = run(
        as_postgres,
        &binary("pg_ctl")?,
        &[
            "-D",
            data.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-o",
            &opts,
            "-w",
            "start",
        ],
    )?;
    anyhow::ensure!(
        out.status.success(),
        "pg_ctl start failed; see {}",
        log.display()
    );
    Ok(Running {
        dir,
        port,
        as_postgres,
    })
}

/// A fresh database on the throwaway server (started on first use).
pub async fn database() -> anyhow::Result<String> {
    let port = {
        let mut guard = SERVER.lock().expect("pg lock");
        if guard.is_none() {
            *guard = Some(start()?);
        }
        guard.as_ref().map(|r| r.port).expect("started")
    };
    let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
    use sqlx::Connection;
    let mut conn =
        sqlx::PgConnection::connect(&format!("postgres://postgres@127.0.0.1:{port}/postgres"))
            .await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    Ok(format!("postgres://postgres@127.0.0.1:{port}/{name}"))
}

pub fn stop() {
    if let Some(r) = SERVER.lock().expect("pg lock").take() {
        if let Ok(pg_ctl) = binary("pg_ctl") {
            let data = r.dir.join("data");
            let _ = run(
                r.as_postgres,
                &pg_ctl,
                &["-D", data.to_str().unwrap(), "-m", "fast", "stop"],
            );
        }
        let _ = std::fs::remove_dir_all(&r.dir);
    }
}
