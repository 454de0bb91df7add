//! A throwaway PostgreSQL server for the whole test binary, started from the
//! binaries on this machine on a random port and removed at process exit.
//! Each test gets its own database.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

struct PgServer {
    dir: PathBuf,
    port: u16,
    as_postgres_user: bool,
}

static SERVER: OnceLock<PgServer> = OnceLock::new();

const HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl, postgres) are required for the \
store contract tests; install them (Debian: apt-get install postgresql) and put them on PATH";

fn find(binary: &str) -> PathBuf {
    if let Ok(out) = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {binary}"))
        .output()
    {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            return PathBuf::from(p);
        }
    }
    for dir in std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
    {
        let candidate = dir.path().join("bin").join(binary);
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("{binary} not found. {HINT}");
}

fn run(server_as_postgres: bool, program: &PathBuf, args: &[&str]) -> std::process::Output {
    let mut cmd = if server_as_postgres {
        let mut c = Command::new("runuser");
        c.arg("-u").arg("postgres").arg("--").arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}. {HINT}", program.display()))
}

extern "C" fn stop_server() {
    if let Some(s) = SERVER.get() {
        let pg_ctl = find("pg_ctl");
        let dir = s.dir.join("data");
        let _ = run(
            s.as_postgres_user,
            &pg_ctl,
            &["-D", dir.to_str().unwrap(), "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&s.dir);
    }
}

fn start() -> PgServer {
    let initdb = find("initdb");
    let pg_ctl = find("pg_ctl");
    let as_postgres_user = unsafe { libc::geteuid() } == 0;
    let dir = std::env::temp_dir().join(format!("switchboard-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if as_postgres_user {
        let status = Command::new("chown")
            .arg("-R")
            .arg("postgres")
            .arg(&dir)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "chown of the PostgreSQL test directory failed"
        );
    }
    let data = dir.join("data");
    let out = run(
        as_postgres_user,
        &initdb,
        &[
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        ],
    );
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
            dir.display()
        );
        let log = dir.join("pg.log");
        let out = run(
            as_postgres_user,
            &pg_ctl,
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        if out.status.success() {
            let server = PgServer {
                dir: dir.clone(),
                port,
                as_postgres_user,
            };
            return server;
        }
    }
    panic!(
        "PostgreSQL did not start; see {}",
        dir.join("pg.log").display()
    );
}

/// A new, empty database on the shared throwaway server.
pub async fn fresh_database() -> String {
    let server = SERVER.get_or_init(|| {
        let s = start();
        unsafe { libc::atexit(stop_server) };
        s
    });
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let admin = format!("postgres://postgres@127.0.0.1:{}/postgres", server.port);
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to throwaway PostgreSQL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    conn.close().await.ok();
    format!("postgres://postgres@127.0.0.1:{}/{name}", server.port)
}
