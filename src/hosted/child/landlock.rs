//! The child's file rules (ADR 0031 §4): Landlock, unprivileged, so the
//! entry reads and executes only the system's directories
//! (`hosted.read_paths`) and its interpreter, and writes only its own copy
//! (never the hub's database or another run's files). The paths are
//! opened in the hub before the fork; the child only makes system calls.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const CREATE_RULESET: libc::c_long = 444;
const ADD_RULE: libc::c_long = 445;
const RESTRICT_SELF: libc::c_long = 446;
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// The rights a rule on a file (not a directory) may carry.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15);

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Every filesystem right the running kernel's Landlock knows.
fn handled(abi: i64) -> u64 {
    match abi {
        1 => (1 << 13) - 1,
        2 => (1 << 14) - 1,
        3 | 4 => (1 << 15) - 1,
        _ => (1 << 16) - 1,
    }
}

/// The rules, ready before the fork.
pub struct Rules {
    abi: i64,
    paths: Vec<(OwnedFd, u64)>,
}

fn open_path(p: &Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(p)
        .ok()
        .map(OwnedFd::from)
}

impl Rules {
    /// Read and execute under each of `read`, everything under `own`;
    /// `/dev/null` read and write. Paths that do not exist are left out.
    pub fn open(own: &Path, read: &[PathBuf]) -> Rules {
        // SAFETY: the version query takes no pointer.
        let abi = unsafe {
            libc::syscall(
                CREATE_RULESET,
                std::ptr::null::<RulesetAttr>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        let all = handled(abi);
        let mut paths = Vec::new();
        let mut add = |p: &Path, rights: u64| {
            if let Some(fd) = open_path(p) {
                let rights = if p.is_dir() {
                    rights
                } else {
                    rights & FILE_RIGHTS
                };
                paths.push((fd, rights & all));
            }
        };
        for p in read {
            add(p, EXECUTE | READ_FILE | READ_DIR);
        }
        add(Path::new("/dev/null"), READ_FILE | WRITE_FILE);
        add(own, all);
        Rules { abi, paths }
    }

    /// In the forked child: the rules on this process, for good. False
    /// when the kernel has no Landlock or refuses a rule.
    pub fn apply(&self) -> bool {
        if self.abi < 1 {
            return false;
        }
        let attr = RulesetAttr {
            handled_access_fs: handled(self.abi),
        };
        // SAFETY: system calls on a stack struct and descriptors this
        // process owns.
        unsafe {
            let ruleset = libc::syscall(
                CREATE_RULESET,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            );
            if ruleset < 0 {
                return false;
            }
            let ruleset = ruleset as libc::c_int;
            for (fd, rights) in &self.paths {
                let rule = PathBeneathAttr {
                    allowed_access: *rights,
                    parent_fd: fd.as_raw_fd(),
                };
                if libc::syscall(
                    ADD_RULE,
                    ruleset,
                    RULE_PATH_BENEATH,
                    &rule as *const PathBeneathAttr,
                    0u32,
                ) != 0
                {
                    libc::close(ruleset);
                    return false;
                }
            }
            let ok = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::syscall(RESTRICT_SELF, ruleset, 0u32) == 0;
            libc::close(ruleset);
            ok
        }
    }
}
