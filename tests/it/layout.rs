//! The source layout's promises (docs/architecture.md, ADR 0015): the
//! dependencies between top-level modules of `src/` form no cycle, the
//! hub's shared state never reaches the layers that use it, `domain` uses
//! nothing of the crate, and no source file grows past the size a newcomer
//! can read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file past this many lines is split by what it is about.
const MAX_FILE_LINES: usize = 650;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module name -> the files that make it up.
fn modules() -> BTreeMap<String, Vec<PathBuf>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(src()).expect("read src") {
        let path = entry.expect("dir entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name == "lib" || name == "main" {
            continue;
        }
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else {
            files.push(path);
        }
        out.insert(name, files);
    }
    out
}

/// Code without `//` comments (doc comments name other modules freely).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every top-level module named after `crate::`, also inside a grouped
/// `crate::{a, b::c}` import.
fn crate_uses(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(group_heads(group));
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(word);
        }
    }
    out
}

/// The first path segment of each item of a `{a::b, c, d::{e, f}}` group
/// (the text after its opening brace), up to its closing brace.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut item_start, mut word) = (0usize, true, String::new());
    for c in group.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if depth == 0 && item_start && !word.is_empty() {
            heads.push(word.clone());
        }
        if !word.is_empty() {
            item_start = false;
        }
        word.clear();
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            _ => {}
        }
    }
    heads
}

fn dependency_graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, files)| {
            let mut deps = BTreeSet::new();
            for f in files {
                let code = code_of(&std::fs::read_to_string(f).expect("read source"));
                deps.extend(
                    crate_uses(&code)
                        .into_iter()
                        .filter(|d| d != name && names.contains(d)),
                );
            }
            (name.clone(), deps)
        })
        .collect()
}

/// Whether `to` is reachable from `from`, and by which path.
fn path_between(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap().clone();
        if last == to && path.len() > 1 {
            return Some(path);
        }
        if !seen.insert(last.clone()) {
            continue;
        }
        for next in graph.get(&last).into_iter().flatten() {
            let mut p = path.clone();
            p.push(next.clone());
            stack.push(p);
        }
    }
    None
}

#[test]
fn grouped_and_plain_crate_uses_are_both_found() {
    let uses = crate_uses(
        "use crate::hub::Hub;\nuse crate::{store::{events::A, B}, domain::x};\nlet _ = crate::rpc::frame::parse(s);",
    );
    let expected: BTreeSet<String> = ["hub", "store", "domain", "rpc"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(uses, expected);
}

#[test]
fn top_level_modules_form_no_cycle() {
    let graph = dependency_graph();
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|m| path_between(&graph, m, m).map(|p| p.join(" -> ")))
        .collect();
    assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
}

#[test]
fn the_hub_and_the_domain_do_not_reach_outward() {
    let graph = dependency_graph();
    let outer = [
        "handlers", "gates", "http", "server", "cli", "jobs", "gateway", "access",
    ];
    let hub: Vec<&String> = graph["hub"]
        .iter()
        .filter(|d| outer.contains(&d.as_str()))
        .collect();
    assert!(hub.is_empty(), "hub uses outer layers: {hub:?}");
    assert!(
        graph["domain"].is_empty(),
        "domain must be pure, uses {:?}",
        graph["domain"]
    );
}

#[test]
fn no_source_file_is_too_long_to_read() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).ok()?.lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by what they are about: {long:?}"
    );
}

/// Every spelling of a NotFound answer: the JSON-RPC constructor and kind,
/// the REST constructor and status, and the wire code and name.
const NOT_FOUND_SPELLINGS: [&str; 6] = [
    "RpcError::not_found(",
    "ErrorKind::NotFound",
    "ApiError::not_found(",
    "StatusCode::NOT_FOUND",
    "NotFoundError",
    "-32004",
];

/// The places outside `access` that may spell a NotFound, each with why:
/// none of them answers about a resource a principal names.
const NOT_FOUND_ALLOWED: [(&str, &str); 12] = [
    // The Refusal -> 404 translation of what `access::reject` decided.
    ("http/error.rs", "StatusCode::NOT_FOUND"),
    // REST messages run the gateway's handlers: their RpcError (built by
    // `access::reject`) translated to its REST status.
    ("http/messages.rs", "ErrorKind::NotFound"),
    ("http/messages.rs", "StatusCode::NOT_FOUND"),
    // An own-key rotation whose principal is gone: about the caller itself.
    ("http/error.rs", "ApiError::not_found("),
    // The fallback for a route that does not exist.
    ("http/mod.rs", "ApiError::not_found("),
    // The operator's routes (a disabled admin API is "no such route", an
    // app the operator looks up): the operator is no principal, nothing
    // is hidden from it.
    ("http/admin.rs", "ApiError::not_found("),
    // The installation routes (ADR 0023 §4, §5): operator routes, and two
    // an app reaches with its key for its own id only, where any other id
    // is answered `app not found` before anything is read, so another
    // app's id answers exactly as a missing one.
    ("http/installations.rs", "ApiError::not_found("),
    // The hosted runs' routes (ADR 0031): operator routes only.
    ("http/runs.rs", "ApiError::not_found("),
    ("http/runs.rs", "StatusCode::NOT_FOUND"),
    // The operator's console (ADR 0030): a console without `admin.token`
    // is "no such route", and a file name not in the embedded bundle.
    ("http/console/login.rs", "ApiError::not_found("),
    ("http/console/pages.rs", "ApiError::not_found("),
    // Webhook subscriptions (ADR 0033): an app's own, after its decision on
    // its own stream; one read by id answers a missing subscription and
    // another app's alike (`subscription not found`), so hidden is missing.
    ("http/webhook_subscriptions.rs", "ApiError::not_found("),
];

/// The files that answer a principal's requests: the handlers and every
/// REST route (operator routes are allowed their spellings by name in
/// [`NOT_FOUND_ALLOWED`]), so a new principal route is scanned unasked.
fn principal_answering_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&src().join("handlers"), &mut files);
    rust_files(&src().join("http"), &mut files);
    files
}

/// Hidden equals missing, structurally (ADR 0020 §3): every NotFound a
/// principal gets is built by `access::reject` from what it asked for, so
/// no handler or principal route constructs one itself, in any spelling.
#[test]
fn only_access_builds_a_principals_not_found() {
    let (mut found, mut used) = (Vec::new(), Vec::new());
    for f in principal_answering_files() {
        let code = code_of(&std::fs::read_to_string(&f).expect("read source"));
        let name = f
            .strip_prefix(src())
            .expect("under src")
            .display()
            .to_string();
        let name = name.replace('\\', "/");
        for needle in NOT_FOUND_SPELLINGS {
            if !code.contains(needle) {
                continue;
            }
            match NOT_FOUND_ALLOWED
                .iter()
                .find(|(file, n)| *file == name && *n == needle)
            {
                Some(allowed) => used.push(*allowed),
                None => found.push(format!("{name} uses {needle}")),
            }
        }
    }
    assert!(
        found.is_empty(),
        "NotFound built outside access: {found:#?}"
    );
    let stale: Vec<_> = NOT_FOUND_ALLOWED
        .iter()
        .filter(|a| !used.contains(a))
        .collect();
    assert!(stale.is_empty(), "allowed but no longer used: {stale:?}");
}
