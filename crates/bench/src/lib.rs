//! The results of `hcloud-ccm-bench` as the one source of the project's benchmark numbers: the
//! table a run prints, the figures the other documents quote (derived from that table, never
//! typed by hand), and the block of `docs/benchmarks.md` both are written into.
//!
//! Documents quote a figure as a Markdown link to the results, e.g.
//! `[2.03 requests per route](docs/benchmarks.md#latest-results)`; [`quoted_numbers`] finds
//! such links so that a test can check every number in them against the block.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// First line of the generated block in `docs/benchmarks.md`.
pub const BEGIN: &str = "<!-- BEGIN hcloud-ccm-bench results: written by `hcloud-ccm-bench --write-results docs/benchmarks.md`; do not edit -->";
/// Last line of the generated block.
pub const END: &str = "<!-- END hcloud-ccm-bench results -->";

/// Why a document could not be read or updated.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The document has no generated block, or an unfinished one.
    #[error("no block between {BEGIN:?} and {END:?}")]
    NoBlock,
    /// The block has no results table.
    #[error("the results block has no table")]
    NoTable,
}

/// One row of the table.
#[derive(Debug, Default, Clone)]
pub struct Row {
    /// What the scenario did.
    pub scenario: String,
    /// Requests by endpoint (`GET /servers`), as the simulator counted them.
    pub counts: BTreeMap<String, u64>,
    /// Latencies and other observations, in words.
    pub latency: String,
    /// The bar on the total requests, if any, and whether it held.
    pub bar: Option<(u64, bool)>,
    /// Whether `--check` fails on this bar (bars of work still under way elsewhere are only
    /// reported).
    pub enforced: bool,
    /// The CCM's resident and peak memory after the scenario, in KiB.
    pub rss: Option<(u64, u64)>,
    /// The CCM's writes to the Kubernetes API in the scenario, by client, verb and resource.
    pub kube_writes: BTreeMap<String, u64>,
}

impl Row {
    /// All requests of the scenario.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// The requests that are not `GET`s.
    pub fn writes(&self) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| !k.starts_with("GET "))
            .map(|(_, n)| *n)
            .sum()
    }
}

const HEADER: &str = "| scenario | requests | writes | by endpoint | latency | bar | CCM RSS (peak) | CCM writes to Kubernetes |\n|---|---:|---:|---|---|---|---|---|\n";

/// The results table, as Markdown.
pub fn table(rows: &[Row]) -> String {
    let mut text = HEADER.to_owned();
    for row in rows {
        let by: Vec<String> = row
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("`{k}` {n}"))
            .collect();
        let bar = match row.bar {
            Some((bar, true)) => format!("<= {bar} ok"),
            Some((bar, false)) if row.enforced => format!("<= {bar} **over**"),
            Some((bar, false)) => format!("<= {bar} over (reported only)"),
            None => String::new(),
        };
        let rss = row.rss.map_or_else(String::new, |(now, peak)| {
            format!(
                "{:.1} ({:.1}) MiB",
                now as f64 / 1024.0,
                peak as f64 / 1024.0
            )
        });
        let kube: Vec<String> = row
            .kube_writes
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.scenario,
            row.total(),
            row.writes(),
            by.join(", "),
            row.latency,
            bar,
            rss,
            kube.join(", ")
        );
    }
    text
}

/// A row of a results table read back: scenario, total requests and latency.
#[derive(Debug, Clone, PartialEq)]
struct TableRow {
    scenario: String,
    requests: u64,
    latency: String,
}

fn parse_table(text: &str) -> Vec<TableRow> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| scenario "))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            Some(TableRow {
                scenario: cells.first()?.to_string(),
                requests: cells.get(1)?.parse().ok()?,
                latency: cells.get(4)?.to_string(),
            })
        })
        .collect()
}

/// The first number in `text` after `marker`, as written.
fn number_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The first number in `text`, as written.
fn first_number(text: &str) -> Option<&str> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    number_after(&text[start..], "")
}

/// The figures the other documents quote, derived from a results table: (figure, value with
/// unit). A figure whose scenario is missing from the table is left out.
pub fn figures(table_text: &str) -> Vec<(String, String)> {
    let rows = parse_table(table_text);
    let find = |prefix: &'static str| rows.iter().find(|r| r.scenario.starts_with(prefix));
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            out.push((name.to_owned(), value));
        }
    };
    // The seconds written after `marker` in a row's latency text.
    let secs =
        |row: &TableRow, marker: &str| number_after(&row.latency, marker).map(|v| format!("{v} s"));
    let per = |row: &TableRow, prefix: &str| -> Option<String> {
        let count: f64 = number_after(&row.scenario, prefix)?.parse().ok()?;
        Some(format!("{:.2}", row.requests as f64 / count))
    };
    if let Some(r) = find("routes for ") {
        add(
            "requests per new route",
            per(r, "routes for ").map(|v| format!("{v} requests")),
        );
        add(
            "all new routes in place after",
            secs(r, "all in place after"),
        );
    }
    let mut bursts = rows
        .iter()
        .filter(|r| r.scenario.contains("new LoadBalancer Services at once"));
    if let Some(r) = bursts.next() {
        add(
            "requests per new load balancer (burst)",
            per(r, "").map(|v| format!("{v} requests")),
        );
        add("burst ingress p50", secs(r, "p50"));
        add("burst ingress p99", secs(r, "p99"));
    }
    if let Some(r) = bursts.next() {
        add(
            "requests per new load balancer (after the burst)",
            per(r, "").map(|v| format!("{v} requests")),
        );
    }
    if let Some(r) = find("steady state") {
        add(
            "steady state",
            first_number(&r.latency).map(|v| format!("{v} requests/h")),
        );
    }
    for (prefix, name) in [
        ("no-op reconcile", "no-op reconcile of one Service"),
        ("leader start", "leader start"),
        ("one Node joins", "one Node joins"),
    ] {
        if let Some(r) = find(prefix) {
            let unit = if r.requests == 1 {
                "request"
            } else {
                "requests"
            };
            add(name, Some(format!("{} {unit}", r.requests)));
        }
    }
    if let Some(r) = find("peak RSS") {
        add(
            "peak RSS",
            first_number(&r.latency).map(|v| format!("{v} MiB")),
        );
    }
    for (prefix, name, marker) in [
        (
            "a server powers off",
            "shutdown taint after the power-off",
            "shutdown taint after",
        ),
        (
            "a server is deleted",
            "deleted server's Node gone after",
            "Node gone after",
        ),
        (
            "a server is deleted",
            "its route gone after the Node",
            "its route gone",
        ),
        (
            "deleting ",
            "load balancers of deleted Services gone after",
            "gone after",
        ),
    ] {
        if let Some(r) = find(prefix) {
            add(name, secs(r, marker));
        }
    }
    out
}

/// The figures as a Markdown table.
pub fn figures_table(figures: &[(String, String)]) -> String {
    let mut text = "| figure | value |\n|---|---:|\n".to_owned();
    for (name, value) in figures {
        let _ = writeln!(text, "| {name} | {value} |");
    }
    text
}

/// The whole generated block: what was run, the table, and the figures derived from it.
pub fn block(run: &str, table_text: &str) -> String {
    format!(
        "{BEGIN}\n{run}\n\n{table_text}\nThe figures the other documents quote, derived from this table:\n\n{}{END}",
        figures_table(&figures(table_text))
    )
}

/// The generated block of `doc`, markers included.
pub fn find_block(doc: &str) -> Result<&str, ResultsError> {
    let start = doc.find(BEGIN).ok_or(ResultsError::NoBlock)?;
    let end = doc[start..].find(END).ok_or(ResultsError::NoBlock)? + start + END.len();
    Ok(&doc[start..end])
}

/// The run line and the results table of a generated block.
pub fn read_block(block: &str) -> Result<(String, String), ResultsError> {
    let body = block
        .strip_prefix(BEGIN)
        .ok_or(ResultsError::NoBlock)?
        .trim_start_matches('\n');
    let run = body.lines().next().unwrap_or_default().to_owned();
    let start = body.find(HEADER).ok_or(ResultsError::NoTable)?;
    let table_len = body[start..]
        .find("\n\n")
        .map_or(body.len() - start, |i| i + 1);
    Ok((run, body[start..start + table_len].to_owned()))
}

/// `doc` with its generated block replaced by `block`.
pub fn replace_block(doc: &str, block: &str) -> Result<String, ResultsError> {
    let old = find_block(doc)?;
    Ok(doc.replacen(old, block, 1))
}

/// The numbers (as written) in the text of every Markdown link of `doc` whose target contains
/// `target` (e.g. `benchmarks.md#latest-results`), with the link text.
pub fn quoted_numbers(doc: &str, target: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else {
            break;
        };
        let text = &after[..close];
        let link = &after[close + 2..];
        let link_end = link.find(')').unwrap_or(link.len());
        if text.contains('[') {
            // A nested bracket: start again from it.
            rest = after;
            continue;
        }
        if link[..link_end].contains(target) {
            out.push((text.to_owned(), numbers(text)));
        }
        rest = &link[link_end..];
    }
    out
}

/// Every number in `text` (`2.03`, `110`, `24.6`), as written.
pub fn numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_ascii_digit() || (c == '.' && !current.is_empty()) {
            current.push(c);
        } else if !current.is_empty() {
            out.push(current.trim_end_matches('.').to_owned());
            current.clear();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rows() -> Vec<Row> {
        let mut routes = Row {
            scenario: "routes for 1000 new Nodes (network + action requests)".into(),
            latency: "20 after 7.3 s, all in place after 318.8 s (2034 requests)".into(),
            ..Row::default()
        };
        routes.counts.insert("GET /actions/{id}".into(), 1034);
        routes
            .counts
            .insert("POST /networks/{id}/actions/add_route".into(), 1000);
        routes.bar = Some((2202, true));
        let mut burst = Row {
            scenario: "20 new LoadBalancer Services at once (2 ports)".into(),
            latency: "ingress 20/20: p50 1.6 s, p99 2.5 s (<= 5 s ok)".into(),
            ..Row::default()
        };
        burst.counts.insert("POST /load_balancers".into(), 44);
        let mut off = Row {
            scenario: "a server powers off".into(),
            latency: "shutdown taint after 10.6 s".into(),
            ..Row::default()
        };
        off.counts.insert("GET /servers".into(), 25);
        let mut join = Row {
            scenario: "one Node joins, selected by 100 load balancers".into(),
            latency: "route in place after 1.0 s".into(),
            rss: Some((20787, 22425)),
            ..Row::default()
        };
        join.counts.insert("GET /servers".into(), 110);
        vec![routes, burst, off, join]
    }

    #[test]
    fn figures_come_from_the_table() {
        let text = table(&rows());
        assert!(text.contains("| 2034 | 1000 |"), "{text}");
        assert!(text.contains("20.3 (21.9) MiB"), "{text}");
        let figures = figures(&text);
        let get = |name: &str| {
            figures
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("requests per new route"), Some("2.03 requests"));
        assert_eq!(get("all new routes in place after"), Some("318.8 s"));
        assert_eq!(
            get("requests per new load balancer (burst)"),
            Some("2.20 requests")
        );
        assert_eq!(get("burst ingress p99"), Some("2.5 s"));
        assert_eq!(get("shutdown taint after the power-off"), Some("10.6 s"));
        assert_eq!(get("one Node joins"), Some("110 requests"));
        assert_eq!(get("leader start"), None, "no such row");
    }

    #[test]
    fn the_block_is_replaced_and_read_back() {
        let text = table(&rows());
        let doc = format!("# B\n\n{BEGIN}\nold\n{END}\n\nafter\n");
        let new = replace_block(&doc, &block("Run: scale 1.", &text)).unwrap();
        assert!(
            new.starts_with("# B\n\n") && new.ends_with("\n\nafter\n"),
            "{new}"
        );
        let (run, read) = read_block(find_block(&new).unwrap()).unwrap();
        assert_eq!(run, "Run: scale 1.");
        assert_eq!(read, text);
        assert!(
            new.contains("| requests per new route | 2.03 requests |"),
            "{new}"
        );
        assert!(matches!(
            replace_block("no block", "x"),
            Err(ResultsError::NoBlock)
        ));
    }

    #[test]
    fn linked_numbers_are_found() {
        let doc = "About [2.03 requests per route](docs/benchmarks.md#latest-results), \
                   not [this 5](other.md), and [a taint after 10.6 s.](benchmarks.md#latest-results).";
        assert_eq!(
            quoted_numbers(doc, "benchmarks.md#latest-results"),
            vec![
                (
                    "2.03 requests per route".to_owned(),
                    vec!["2.03".to_owned()]
                ),
                ("a taint after 10.6 s.".to_owned(), vec!["10.6".to_owned()]),
            ]
        );
    }
}
