//! Starting the entry as an isolated child (ADR 0031 §4): its own process
//! group, a new user and network namespace, kernel limits, the broker
//! channel at fd 3 and nothing else inherited, a cleared environment.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

/// The broker channel's descriptor in the child.
pub const BROKER_FD: i32 = 3;

/// What the child is started with.
pub struct Spec<'a> {
    pub program: PathBuf,
    pub args: Vec<PathBuf>,
    pub dir: &'a Path,
    pub env: Vec<(&'static str, String)>,
    pub address_space_bytes: u64,
    pub max_open_files: u64,
    pub allow_unisolated: bool,
    /// What the child may read and execute beside its own copy (Landlock).
    pub read_paths: Vec<PathBuf>,
}

/// A started child: the process, the hub's end of the broker channel, and
/// whether it has its own network namespace.
pub struct Started {
    pub child: Child,
    pub broker: UnixStream,
    /// Its own network namespace and the Landlock file rules both hold.
    pub isolated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The kernel gave no network namespace and the operator did not allow
    /// running without one.
    #[error("unshare(CLONE_NEWUSER | CLONE_NEWNET) failed: {0}")]
    NoIsolation(std::io::Error),
    /// The kernel refused the Landlock file rules (no Landlock, or an
    /// error) and the operator did not allow running without them.
    #[error("Landlock file rules could not be applied: {0}")]
    NoFileIsolation(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

mod landlock;

/// Tells the parent, through the broker channel, why isolation failed.
/// `ENONET` is never an answer of execve, so it marks this failure.
const ISOLATION_MARK: i32 = libc::ENONET;

/// Resolves a program name on the hub's own `PATH` (the child has none of
/// the hub's environment to look it up in).
pub fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn spawn(spec: Spec<'_>) -> Result<Started, SpawnError> {
    let (hub_end, child_end) = UnixStream::pair()?;
    let child_fd: OwnedFd = child_end.into();
    let raw = child_fd.as_raw_fd();
    let rules = landlock::Rules::open(spec.dir, &spec.read_paths);
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(spec.dir)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let limits = (spec.address_space_bytes, spec.max_open_files);
    let allow = spec.allow_unisolated;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || {
            die_with(parent)?;
            in_child(raw, limits, allow, &rules)
        });
    }
    let spawned = cmd.spawn();
    drop(child_fd);
    let child = match spawned {
        Ok(c) => c,
        Err(e) if e.raw_os_error() == Some(ISOLATION_MARK) => {
            return Err(isolation_refusal(&hub_end));
        }
        Err(e) => return Err(e.into()),
    };
    let flags = read_status(&hub_end)?;
    let network = flags & NETWORK_ISOLATED != 0 && child.id().is_some_and(own_network_namespace);
    let files = flags & FILES_ISOLATED != 0;
    if !(allow || network && files) {
        // Cannot happen (the child refuses to exec without them), but a
        // run without isolation is never let through unallowed.
        return Err(SpawnError::NoIsolation(std::io::Error::other(
            "the child is not isolated",
        )));
    }
    Ok(Started {
        child,
        broker: hub_end,
        isolated: network && files,
    })
}

/// What the child reports before exec: which isolation holds.
const NETWORK_ISOLATED: u8 = 1;
const FILES_ISOLATED: u8 = 2;
/// The stages a refusal names.
const STAGE_UNSHARE: u8 = 1;
const STAGE_LANDLOCK: u8 = 2;

fn read_status(hub_end: &UnixStream) -> std::io::Result<u8> {
    use std::io::Read;
    let mut flag = [0u8; 1];
    (&*hub_end).read_exact(&mut flag)?;
    Ok(flag[0])
}

/// The stage and errno the child wrote before refusing to exec.
fn isolation_refusal(hub_end: &UnixStream) -> SpawnError {
    use std::io::Read;
    let mut buf = [0u8; 5];
    let _ = hub_end.set_nonblocking(true);
    let errno = match (&*hub_end).read_exact(&mut buf) {
        Ok(()) => {
            std::io::Error::from_raw_os_error(i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]))
        }
        Err(_) => std::io::Error::other("unknown error"),
    };
    if buf[0] == STAGE_LANDLOCK {
        SpawnError::NoFileIsolation(errno)
    } else {
        SpawnError::NoIsolation(errno)
    }
}

fn own_network_namespace(pid: u32) -> bool {
    let ns = |p: String| std::fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    match (
        ns(format!("/proc/{pid}/ns/net")),
        ns("/proc/self/ns/net".into()),
    ) {
        (Ok(child), Ok(hub)) => child != hub,
        _ => false,
    }
}

/// The child is killed when the thread that forked it ends: a hub process
/// killed outright leaves no run behind (its row is swept `owner_lost` by
/// the next hub). The forking thread is a runtime worker, which lives as
/// long as the process (nothing here retires workers: no `block_in_place`).
/// A parent that died before the call is caught by `getppid`.
fn die_with(parent: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: plain system calls on this process.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// In the forked child: namespaces, file rules, limits, then the
/// descriptors; the isolation that holds is reported on the channel.
fn in_child(
    broker: i32,
    (address_space, open_files): (u64, u64),
    allow: bool,
    rules: &landlock::Rules,
) -> std::io::Result<()> {
    let refuse = |stage: u8| {
        // SAFETY: reads this thread's errno and writes a stack buffer.
        unsafe {
            let errno = (*libc::__errno_location()).to_ne_bytes();
            let report = [stage, errno[0], errno[1], errno[2], errno[3]];
            libc::write(broker, report.as_ptr().cast(), report.len());
        }
        Err(std::io::Error::from_raw_os_error(ISOLATION_MARK))
    };
    let mut flags = 0u8;
    // SAFETY: plain system calls on values owned by this process.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
            flags |= NETWORK_ISOLATED;
        } else if !allow {
            return refuse(STAGE_UNSHARE);
        }
    }
    if rules.apply() {
        flags |= FILES_ISOLATED;
    } else if !allow {
        return refuse(STAGE_LANDLOCK);
    }
    // SAFETY: plain system calls on values owned by this process.
    unsafe {
        set_limit(libc::RLIMIT_AS, address_space)?;
        set_limit(libc::RLIMIT_CORE, 0)?;
        set_limit(libc::RLIMIT_NOFILE, open_files)?;
        libc::write(broker, (&flags as *const u8).cast(), 1);
        if broker == BROKER_FD {
            if libc::fcntl(BROKER_FD, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        } else if libc::dup2(broker, BROKER_FD) != BROKER_FD {
            return Err(std::io::Error::last_os_error());
        }
        // Everything from 4 up closes at exec, whatever the hub opened
        // without CLOEXEC (marking rather than closing keeps the pipe the
        // standard library reports exec failures on).
        let first = (BROKER_FD + 1) as libc::c_uint;
        if libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

unsafe fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: `limit` is a valid rlimit for the call's duration.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Kills the child's whole process group.
pub fn kill_group(pid: u32) {
    // SAFETY: a signal to a process group this runner made.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

/// Resident memory of a process, in bytes (`/proc/<pid>/statm`).
pub fn resident_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}
