//! The results of `hcloud-ccm-bench` as the one source of the project's benchmark numbers: the
//! table a run prints, the figures the other documents quote (derived from that table, never
//! typed by hand), and the block of `docs/benchmarks.md` both are written into.
//!
//! Documents quote a figure as a marked link to the results, e.g.
//! `[2.03 requests](docs/benchmarks.md#latest-results "bench:routes.per_route")`: the link's
//! title names the figure, and [`prose::write_figures`] rewrites its text whenever the block is
//! written. [`prose`] also finds the measured figures of a document's prose that are neither
//! marked nor linked, so that a test can fail on them.

pub mod prose;

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
    /// A document marks a figure the results block does not have.
    #[error("{file}:{line}: the results block has no figure `{key}`")]
    UnknownFigure {
        /// The document.
        file: String,
        /// The line of the mark.
        line: usize,
        /// The figure's key in the mark.
        key: String,
    },
    /// A document could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The document.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
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

/// A row of a results table read back: scenario, total requests, latency and the CCM's RSS.
#[derive(Debug, Clone, PartialEq)]
struct TableRow {
    scenario: String,
    requests: u64,
    latency: String,
    rss: String,
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
                rss: cells.get(6).map_or_else(String::new, |c| c.to_string()),
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

/// One figure derived from the results table, as the documents quote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The name a document's mark uses (`leader_start.requests`).
    pub key: &'static str,
    /// What the figure is, in words.
    pub name: &'static str,
    /// The value with its unit, as written (`23 requests`, `26.8 MiB`).
    pub value: String,
}

/// The figures the other documents quote, derived from a results table. A figure whose scenario
/// (or whose part of the scenario's row) is missing from the table is left out.
pub fn figures(table_text: &str) -> Vec<Figure> {
    let rows = parse_table(table_text);
    let find = |prefix: &str| rows.iter().find(|r| r.scenario.starts_with(prefix));
    let mut out: Vec<Figure> = Vec::new();
    let mut add = |key: &'static str, name: &'static str, value: Option<String>| {
        if let Some(value) = value {
            out.push(Figure { key, name, value });
        }
    };
    // The seconds written after `marker` in a row's latency text.
    let secs =
        |row: &TableRow, marker: &str| number_after(&row.latency, marker).map(|v| format!("{v} s"));
    let per = |row: &TableRow, prefix: &str| -> Option<String> {
        let count: f64 = number_after(&row.scenario, prefix)?.parse().ok()?;
        Some(format!("{:.2} requests", row.requests as f64 / count))
    };
    let requests = |row: &TableRow| {
        let unit = if row.requests == 1 {
            "request"
        } else {
            "requests"
        };
        format!("{} {unit}", row.requests)
    };
    // The peak in the RSS column, `now (peak) MiB`.
    let peak_rss = |row: &TableRow| number_after(&row.rss, "(").map(|v| format!("{v} MiB"));
    if let Some(r) = find("routes for ") {
        add(
            "routes.per_route",
            "requests per new route",
            per(r, "routes for "),
        );
        add(
            "routes.first_20",
            "the first 20 routes in place after",
            secs(r, "20 after"),
        );
        add(
            "routes.all",
            "all new routes in place after",
            secs(r, "all in place after"),
        );
    }
    let mut node_bursts = rows
        .iter()
        .filter(|r| r.scenario.starts_with("a burst of ") && r.scenario.contains("tainted Nodes"));
    for keys in [
        [
            ("nodes_200.p50", "a burst of 200 Nodes initialised, p50"),
            ("nodes_200.p99", "a burst of 200 Nodes initialised, p99"),
            (
                "nodes_200.all",
                "a burst of 200 Nodes all initialised after",
            ),
            ("nodes_200.requests", "requests for a burst of 200 Nodes"),
        ],
        [
            ("nodes_1000.p50", "a burst of 1000 Nodes initialised, p50"),
            ("nodes_1000.p99", "a burst of 1000 Nodes initialised, p99"),
            (
                "nodes_1000.all",
                "a burst of 1000 Nodes all initialised after",
            ),
            ("nodes_1000.requests", "requests for a burst of 1000 Nodes"),
        ],
    ] {
        if let Some(r) = node_bursts.next() {
            let [p50, p99, all, count] = keys;
            add(p50.0, p50.1, secs(r, "p50"));
            add(p99.0, p99.1, secs(r, "p99"));
            add(all.0, all.1, secs(r, "all after"));
            add(count.0, count.1, Some(requests(r)));
        }
    }
    let mut bursts = rows
        .iter()
        .filter(|r| r.scenario.contains("new LoadBalancer Services at once"));
    for keys in [
        [
            ("lb_20.per_lb", "requests per new load balancer (burst)"),
            ("lb_20.p50", "burst ingress p50"),
            ("lb_20.p99", "burst ingress p99"),
        ],
        [
            (
                "lb_80.per_lb",
                "requests per new load balancer (after the burst)",
            ),
            ("lb_80.p50", "ingress p50 after the burst"),
            ("lb_80.p99", "ingress p99 after the burst"),
        ],
    ] {
        if let Some(r) = bursts.next() {
            let [count, p50, p99] = keys;
            add(count.0, count.1, per(r, ""));
            add(p50.0, p50.1, secs(r, "p50"));
            add(p99.0, p99.1, secs(r, "p99"));
        }
    }
    if let Some(r) = find("steady state") {
        add(
            "steady_state.per_hour",
            "steady state",
            first_number(&r.latency).map(|v| format!("{v} requests/h")),
        );
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.scenario.contains("dedicated Nodes NotReady"))
    {
        add(
            "robot.per_hour",
            "Robot requests an hour with 10 NotReady dedicated Nodes",
            r.latency
                .contains("requests/h")
                .then(|| first_number(&r.latency))
                .flatten()
                .map(|v| format!("{v} requests/h")),
        );
    }
    if let Some(r) = find("no-op reconcile") {
        add(
            "no_op.requests",
            "no-op reconcile of one Service",
            Some(requests(r)),
        );
    }
    if let Some(r) = find("peak RSS") {
        add(
            "peak_rss",
            "peak RSS before the restart",
            first_number(&r.latency).map(|v| format!("{v} MiB")),
        );
    }
    if let Some(r) = find("leader start") {
        add("leader_start.requests", "leader start", Some(requests(r)));
        add(
            "leader_start.peak_rss",
            "peak RSS after the leader start",
            peak_rss(r),
        );
    }
    if let Some(r) = find("one Node joins") {
        add("join.requests", "one Node joins", Some(requests(r)));
        add(
            "join.targets_after",
            "the joining Node a target of every load balancer after",
            secs(r, "load balancer after"),
        );
    }
    for (prefix, key, name, marker) in [
        (
            "a server powers off",
            "lifecycle.shutdown_taint",
            "shutdown taint after the power-off",
            "shutdown taint after",
        ),
        (
            "a server is deleted",
            "lifecycle.node_gone",
            "deleted server's Node gone after",
            "Node gone after",
        ),
        (
            "a server is deleted",
            "lifecycle.route_gone",
            "its route gone after the Node",
            "its route gone",
        ),
        (
            "deleting ",
            "lb_delete.gone",
            "load balancers of deleted Services gone after",
            "gone after",
        ),
    ] {
        if let Some(r) = find(prefix) {
            add(key, name, secs(r, marker));
        }
    }
    out
}

/// The figures as a Markdown table.
pub fn figures_table(figures: &[Figure]) -> String {
    let mut text = "| figure | key | value |\n|---|---|---:|\n".to_owned();
    for f in figures {
        let _ = writeln!(text, "| {} | `{}` | {} |", f.name, f.key, f.value);
    }
    text
}

/// The whole generated block: what was run, the table, and the figures derived from it.
pub fn block(run: &str, table_text: &str) -> String {
    format!(
        "{BEGIN}\n{run}\n\n{table_text}\nThe figures derived from this table, which the other documents quote as marked links (`[value](benchmarks.md#latest-results \"bench:key\")`, rewritten with this block):\n\n{}{END}",
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
            latency: "a target of every load balancer after 1.0 s".into(),
            rss: Some((20787, 22425)),
            ..Row::default()
        };
        join.counts.insert("GET /servers".into(), 110);
        let mut nodes = Row {
            scenario: "a burst of 200 tainted Nodes at once".into(),
            latency: "initialised: p50 0.5 s, p99 0.9 s, all after 1.1 s (created within 0.1 s)"
                .into(),
            ..Row::default()
        };
        nodes.counts.insert("GET /servers".into(), 6);
        vec![routes, nodes, burst, off, join]
    }

    #[test]
    fn figures_come_from_the_table() {
        let text = table(&rows());
        assert!(text.contains("| 2034 | 1000 |"), "{text}");
        assert!(text.contains("20.3 (21.9) MiB"), "{text}");
        let figures = figures(&text);
        let get = |key: &str| {
            figures
                .iter()
                .find(|f| f.key == key)
                .map(|f| f.value.as_str())
        };
        assert_eq!(get("routes.per_route"), Some("2.03 requests"));
        assert_eq!(get("routes.first_20"), Some("7.3 s"));
        assert_eq!(get("routes.all"), Some("318.8 s"));
        assert_eq!(get("lb_20.per_lb"), Some("2.20 requests"));
        assert_eq!(get("lb_20.p99"), Some("2.5 s"));
        assert_eq!(get("lifecycle.shutdown_taint"), Some("10.6 s"));
        assert_eq!(get("join.requests"), Some("110 requests"));
        assert_eq!(get("join.targets_after"), Some("1.0 s"));
        assert_eq!(get("nodes_200.p50"), Some("0.5 s"));
        assert_eq!(get("nodes_200.all"), Some("1.1 s"));
        assert_eq!(get("nodes_200.requests"), Some("6 requests"));
        assert_eq!(get("nodes_1000.p50"), None, "one burst only");
        assert_eq!(get("leader_start.requests"), None, "no such row");
        assert_eq!(get("leader_start.peak_rss"), None, "no such row");
        let keys: Vec<&str> = figures.iter().map(|f| f.key).collect();
        let unique: std::collections::BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(keys.len(), unique.len(), "{keys:?}");
    }

    #[test]
    fn the_rss_figures_are_the_peaks_of_their_rows() {
        let mut leader = Row {
            scenario: "leader start, 10 Nodes and 2 unchanged Services in place".into(),
            latency: "requests until idle (5 s without one)".into(),
            rss: Some((20787, 34611)),
            ..Row::default()
        };
        leader.counts.insert("GET /servers".into(), 23);
        let peak = Row {
            scenario: "peak RSS of hcloud-ccm before the restart (10 Nodes, 2 Services)".into(),
            latency: "26.8 MiB".into(),
            ..Row::default()
        };
        let figures = figures(&table(&[peak, leader]));
        let get = |key: &str| {
            figures
                .iter()
                .find(|f| f.key == key)
                .map(|f| f.value.clone())
        };
        assert_eq!(get("leader_start.requests").as_deref(), Some("23 requests"));
        assert_eq!(get("leader_start.peak_rss").as_deref(), Some("33.8 MiB"));
        assert_eq!(get("peak_rss").as_deref(), Some("26.8 MiB"));
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
            new.contains("| requests per new route | `routes.per_route` | 2.03 requests |"),
            "{new}"
        );
        assert!(matches!(
            replace_block("no block", "x"),
            Err(ResultsError::NoBlock)
        ));
    }
}
