//! The method, event and action tables of `docs/protocol.md`, rendered from
//! the catalogue (`switchboard schema export --docs`). The prose around them
//! is written by hand; the tables are not, so a method added to the
//! catalogue cannot be missing from the reference, and a test fails when the
//! committed tables differ from a fresh render.
//!
//! A table lives between two markers, `<!-- generated: NAME … -->` and
//! `<!-- end generated: NAME -->`. Rows that differ only by name (the
//! agent, person and app twins of one call) are folded into one row.

use serde_json::Value;

/// Where the generated tables live, relative to the repository root.
pub const PROTOCOL_DOC: &str = "docs/protocol.md";

/// The tables in the order the document has them.
const TABLES: [&str; 3] = ["methods", "events", "actions"];

/// `doc` with every generated table replaced by a fresh render. A marker
/// that is missing or out of order is an error naming it: the document
/// decides where a table goes, the export only fills it.
pub fn apply(doc: &str) -> Result<String, String> {
    let openrpc = super::export::openrpc_document();
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    for name in TABLES {
        let start = format!("<!-- generated: {name} (switchboard schema export --docs) -->\n");
        let end = format!("<!-- end generated: {name} -->");
        let begin = rest
            .find(&start)
            .ok_or_else(|| format!("{PROTOCOL_DOC} lacks the marker line `{}`", start.trim()))?;
        let stop = rest[begin..].find(&end).map(|i| begin + i).ok_or_else(|| {
            format!(
                "{PROTOCOL_DOC} lacks the marker `{end}` after `{}`",
                start.trim()
            )
        })?;
        out.push_str(&rest[..begin + start.len()]);
        out.push_str(&render(name, &openrpc));
        rest = &rest[stop..];
    }
    out.push_str(rest);
    Ok(out)
}

fn render(table: &str, openrpc: &Value) -> String {
    let methods = openrpc["methods"].as_array().cloned().unwrap_or_default();
    let components = &openrpc["components"]["schemas"];
    let rows: Vec<Row> = methods
        .iter()
        .filter_map(|m| row(table, m, components))
        .collect();
    let (header, rule) = match table {
        "methods" => (
            "| method | direction | caller | params → result | summary |",
            "|---|---|---|---|---|",
        ),
        "events" => (
            "| event | recipient | payload | summary |",
            "|---|---|---|---|",
        ),
        _ => ("| method | action | rate class |", "|---|---|---|"),
    };
    let mut s = format!("{header}\n{rule}\n");
    for row in fold(rows) {
        s.push_str(&row.line());
        s.push('\n');
    }
    s
}

/// One table row: the names it covers and its other cells, which must be
/// equal for two names to share a row.
struct Row {
    names: Vec<String>,
    /// The caller or recipient, folded like the names.
    who: Vec<String>,
    cells: Vec<String>,
    /// Where the `who` column goes among the cells, counting the name as
    /// the first; `None` for a table without one.
    who_at: Option<usize>,
}

impl Row {
    fn line(&self) -> String {
        let names = self
            .names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut cells = vec![names];
        cells.extend(self.cells.iter().cloned());
        if let Some(at) = self.who_at {
            cells.insert(at, self.who.join(", "));
        }
        format!("| {} |", cells.join(" | "))
    }
}

fn fold(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for row in rows {
        match out.iter_mut().find(|r| r.cells == row.cells) {
            Some(same) => {
                same.names.extend(row.names);
                for who in row.who {
                    if !same.who.contains(&who) {
                        same.who.push(who);
                    }
                }
            }
            None => out.push(row),
        }
    }
    out
}

fn row(table: &str, m: &Value, components: &Value) -> Option<Row> {
    let name = m["name"].as_str()?.to_owned();
    let notification = m["x-notification"] == Value::Bool(true);
    let to_hub = m["x-direction"] == "peer-to-hub";
    let summary = cell(m["summary"].as_str().unwrap_or(""));
    match table {
        "methods" if !notification => {
            let who = if to_hub {
                m["x-caller"].as_str().unwrap_or("").to_owned()
            } else {
                format!("({} receives)", m["x-recipient"].as_str().unwrap_or(""))
            };
            let direction = if to_hub { "peer to hub" } else { "hub to peer" };
            let summary = match m["x-moltzap-v1-name"].as_str() {
                Some(alias) => format!("{summary} A `moltzap-v1` app receives it as `{alias}`."),
                None => summary,
            };
            let shape = format!("{} → {}", params_shape(m), result_shape(m, components));
            Some(Row {
                names: vec![name],
                who: vec![who],
                cells: vec![direction.to_owned(), cell(&shape), summary],
                who_at: Some(2),
            })
        }
        "events" if notification => {
            let who = m["x-recipient"].as_str().unwrap_or("").to_owned();
            let payload = payload_shape(m, components);
            let kind = if m["x-ephemeral"] == Value::Bool(true) {
                "Ephemeral: never stored, not replayed. "
            } else {
                ""
            };
            Some(Row {
                names: vec![name],
                who: vec![who],
                cells: vec![cell(&payload), format!("{kind}{summary}")],
                who_at: Some(1),
            })
        }
        "actions" if to_hub && !notification => {
            let action = match m["x-action"].as_str() {
                Some(a) => format!("`{a}`"),
                None => "none".to_owned(),
            };
            let class = match m["x-rate-class"].as_str() {
                Some(c) => format!("`{c}`"),
                None => "none".to_owned(),
            };
            Some(Row {
                names: vec![name],
                who: Vec::new(),
                cells: vec![action, class],
                who_at: None,
            })
        }
        _ => None,
    }
}

fn params_shape(m: &Value) -> String {
    let members = m["params"]
        .as_array()
        .map(|params| {
            params
                .iter()
                .filter_map(|p| {
                    let name = p["name"].as_str()?;
                    Some(member(
                        name,
                        p["required"] == Value::Bool(true),
                        &p["schema"],
                    ))
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    braces(&members)
}

fn result_shape(m: &Value, components: &Value) -> String {
    match m.get("result") {
        Some(result) => shape(&result["schema"], components),
        None => "(notification)".to_owned(),
    }
}

/// An event's payload members: the envelope is the same for every event
/// and described once, in the prose.
fn payload_shape(m: &Value, components: &Value) -> String {
    m["params"]
        .as_array()
        .and_then(|params| params.iter().find(|p| p["name"] == "payload"))
        .map(|p| shape(&p["schema"], components))
        .unwrap_or_else(|| params_shape(m))
}

/// An object schema as `{a, b?}`; anything else as its type's name.
fn shape(schema: &Value, components: &Value) -> String {
    let resolved = resolve(schema, components);
    match resolved.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let required: Vec<&str> = resolved["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let members: Vec<String> = props
                .iter()
                .map(|(name, s)| member(name, required.contains(&name.as_str()), s))
                .collect();
            braces(&members)
        }
        None => type_name(schema).unwrap_or_else(|| "{}".to_owned()),
    }
}

fn member(name: &str, required: bool, schema: &Value) -> String {
    let optional = !required || nullable(schema);
    format!("{name}{}", if optional { "?" } else { "" })
}

fn braces(members: &[String]) -> String {
    if members.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{{}}}", members.join(", "))
    }
}

fn nullable(schema: &Value) -> bool {
    let null_type = |t: &Value| match t {
        Value::String(s) => s == "null",
        Value::Array(a) => a.iter().any(|x| x == "null"),
        _ => false,
    };
    null_type(&schema["type"])
        || schema["anyOf"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| null_type(&s["type"])))
}

fn resolve<'a>(schema: &'a Value, components: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        Some(name) => &components[name],
        None => schema,
    }
}

fn type_name(schema: &Value) -> Option<String> {
    schema["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .map(str::to_owned)
}

/// A table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_with_markers() -> String {
        let mut doc = String::from("# Protocol\n\nprose\n\n");
        for name in TABLES {
            doc.push_str(&format!(
                "<!-- generated: {name} (switchboard schema export --docs) -->\nstale\n<!-- end generated: {name} -->\n\nmore prose\n"
            ));
        }
        doc
    }

    #[test]
    fn tables_are_filled_between_their_markers_and_prose_is_kept() {
        let out = apply(&doc_with_markers()).unwrap();
        assert!(!out.contains("stale"));
        assert_eq!(out.matches("more prose").count(), 3);
        assert!(out.contains(
            "| `agent/message/send`, `person/message/send` | peer to hub | agent, person \
             | {conversationId, parts, clientMsgId?, replyTo?, threadId?, components?, cardUse?} → {message, delivery, duplicate?} |"
        ));
        assert!(out.contains("`app/network/ping` | hub to peer | (app receives) |"));
        // Rendering twice changes nothing.
        assert_eq!(apply(&out).unwrap(), out);
    }

    #[test]
    fn twins_share_a_row() {
        let out = apply(&doc_with_markers()).unwrap();
        let line = out
            .lines()
            .find(|l| l.starts_with("| `agent/event/ack`"))
            .expect("the ack row");
        assert!(line.contains("`app/event/ack`"), "{line}");
        assert!(
            line.contains("agent, app") || line.contains("agent, person, app"),
            "{line}"
        );
    }

    #[test]
    fn a_missing_marker_is_named() {
        let err = apply("# Protocol\n").unwrap_err();
        assert!(err.contains("generated: methods"), "{err}");
    }
}
