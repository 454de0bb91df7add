//! The report: one entry per measured run, printed as a table and written as
//! JSON with the machine's facts.

use serde_json::{json, Map, Value};

use super::BenchArgs;

#[derive(Clone, Debug)]
pub struct Entry {
    pub scenario: String,
    pub params: Map<String, Value>,
    pub results: Map<String, Value>,
}

impl Entry {
    pub fn new(scenario: &str) -> Entry {
        Entry {
            scenario: scenario.into(),
            params: Map::new(),
            results: Map::new(),
        }
    }

    pub fn param(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.params.insert(k.into(), v.into());
        self
    }

    pub fn result(&mut self, k: &str, v: impl Into<Value>) {
        self.results.insert(k.into(), v.into());
    }

    pub fn number(&self, k: &str) -> Option<f64> {
        self.results.get(k).and_then(Value::as_f64)
    }

    /// At an offered rate: the ceiling's latency on the same schedule, and
    /// what this run adds to it at p50 and p99, so that the hub's share is
    /// read apart from what the machine's sockets and scheduler cost.
    pub fn latency_over(&mut self, ceiling: &Entry) {
        for p in ["p50", "p99"] {
            let k = format!("latency_{p}_ms");
            if let (Some(a), Some(b)) = (self.number(&k), ceiling.number(&k)) {
                self.result(&format!("ceiling_latency_{p}_ms"), b);
                let added = ((a - b) * 1000.0).round() / 1000.0;
                self.result(&format!("latency_{p}_added_ms"), added);
            }
        }
    }

    /// Records `self[k] / other[k]` as `name`.
    pub fn ratio(&mut self, k: &str, other: &Entry, name: &str) {
        if let (Some(a), Some(b)) = (self.number(k), other.number(k)) {
            if b > 0.0 {
                self.result(name, (a / b * 1000.0).round() / 1000.0);
            }
        }
    }
}

pub struct Report {
    pub entries: Vec<Entry>,
    args: String,
}

impl Report {
    pub fn new(args: &BenchArgs) -> Report {
        Report {
            entries: Vec::new(),
            args: format!("{args:?}"),
        }
    }

    pub fn push(&mut self, e: Entry) {
        println!("{}", line(&e));
        self.entries.push(e);
    }

    pub fn to_json(&self) -> Value {
        json!({
            "tool": "switchboard bench",
            "version": env!("CARGO_PKG_VERSION"),
            "args": self.args,
            "machine": machine(),
            "entries": self.entries.iter().map(|e| json!({
                "scenario": e.scenario,
                "params": e.params,
                "results": e.results,
            })).collect::<Vec<_>>(),
        })
    }
}

fn fmt(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() != 0.0 => format!("{f:.3}"),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn line(e: &Entry) -> String {
    let params: Vec<String> = e
        .params
        .iter()
        .map(|(k, v)| format!("{k}={}", fmt(v)))
        .collect();
    let results: Vec<String> = e
        .results
        .iter()
        .map(|(k, v)| format!("{k}={}", fmt(v)))
        .collect();
    format!(
        "{:<12} {:<40} {}",
        e.scenario,
        params.join(" "),
        results.join(" ")
    )
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "memory_gib": (mem_kib as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}
