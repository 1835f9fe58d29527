//! One source of numbers: the results block of `docs/benchmarks.md` is what
//! `hcloud-ccm-bench --write-results` writes (its figures derived from its own table, none typed
//! by hand), and every measured figure of the README and of `docs/*.md` is one of:
//!
//! - a marked figure of that block, `[value](benchmarks.md#latest-results "bench:key")`, whose
//!   text is the block's value (the runner rewrites it with the block);
//! - a number in another link to `benchmarks.md#latest-results` that the block holds, or in a
//!   link to `benchmarks.md#results` that the `node_burst` bench's table holds;
//! - a figure of a measurement that is not the benchmark's, in a section of [`RECORDS`] that
//!   states its own run, or a figure of [`STATED`] whose paragraph states where it comes from.
//!
//! What counts as a measured figure is `hcloud_ccm_bench::prose::measured`'s rule: a number
//! with a unit of time, memory, requests, rate, CPU time or percent that has a decimal fraction
//! or follows a percentile or maximum, or a duration in minutes and seconds, outside code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hcloud_ccm_bench::prose::{self, Problem};
use hcloud_ccm_bench::{block, find_block, numbers, read_block};

/// Sections that record measurements of their own, not the benchmark's: (file, heading, the
/// words in the section that state the run).
const RECORDS: &[(&str, &str, &str)] = &[
    (
        "README.md",
        "### How long the tests take",
        "Measured on 2026-12-04",
    ),
    (
        "docs/benchmarks.md",
        "### Results",
        "These numbers come from one run",
    ),
    (
        "docs/migration.md",
        "### Limits of the Kubernetes client: 200 requests per second, bursts of 400",
        "Measured on 2026-11-25 in two runs of `hcloud-ccm-bench --only-bursts`",
    ),
    (
        "docs/reliability.md",
        "## Result of the largest run",
        "commit\nf5ac352",
    ),
    (
        "docs/deploy.md",
        "### Runs on the oldest version",
        "| 2026-11-28 |",
    ),
    (
        "docs/architecture.md",
        "### The Node store",
        "--example\nnode_store_memory",
    ),
];

/// Single figures that are no figure of the benchmark: (file, figure, the words of its
/// paragraph that say where it comes from).
const STATED: &[(&str, &str, &str)] = &[
    ("docs/deploy.md", "5.3 MB", "measured at commit f1ea92c"),
    // The cost model's arithmetic, not measurements.
    ("docs/benchmarks.md", "66.7 %", "200 × 12 = **2400/h**"),
    ("docs/benchmarks.md", "1.3 %", "4 × 12 = **48/h**"),
    ("docs/benchmarks.md", "10.2 s", "5 ms × (2ᵏ − 1)"),
    ("docs/benchmarks.md", "20.5 s", "5 ms × (2ᵏ − 1)"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap()
}

/// Every document that may quote a benchmark, as the runner finds them, by their paths in the
/// repository.
fn documents() -> Vec<(String, String)> {
    prose::documents(&repo().join("docs/benchmarks.md"))
        .unwrap()
        .into_iter()
        .map(|path| {
            let name = path.strip_prefix(repo()).unwrap().display().to_string();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// The paragraph (between blank lines) around byte `at` of `doc`.
fn paragraph(doc: &str, at: usize) -> &str {
    let start = doc[..at].rfind("\n\n").map_or(0, |i| i + 2);
    let end = doc[at..].find("\n\n").map_or(doc.len(), |i| at + i);
    &doc[start..end]
}

#[test]
fn the_results_block_is_what_the_runner_writes_from_its_own_table() {
    let doc = read("docs/benchmarks.md");
    let written = find_block(&doc).unwrap();
    let (run, table) = read_block(written).unwrap();
    assert!(
        run.starts_with("Run: `hcloud-ccm-bench --scale 1`"),
        "{run}"
    );
    assert!(table.lines().count() > 10, "{table}");
    assert_eq!(
        written,
        block(&run, &table),
        "the block of docs/benchmarks.md was edited by hand; rewrite it with \
         `hcloud-ccm-bench --refresh-results docs/benchmarks.md` (or a new run)"
    );
}

#[test]
fn every_measured_figure_is_the_results_or_states_its_source() {
    let benchmarks = read("docs/benchmarks.md");
    let results = find_block(&benchmarks).unwrap();
    let node_burst = &benchmarks[prose::section(&benchmarks, "### Results").unwrap()];
    let node_burst_held: BTreeSet<String> = numbers(node_burst).into_iter().collect();
    let docs = documents();
    assert!(docs.iter().any(|(name, _)| name == "README.md"), "{docs:?}");
    let mut wrong = Vec::new();
    let mut records_used = BTreeSet::new();
    let mut stated_used = BTreeSet::new();
    let mut marked = 0;
    let mut node_burst_quotes = 0;
    for (name, text) in &docs {
        marked += prose::links(text)
            .iter()
            .filter(|l| l.mark().is_some())
            .count();
        let records: Vec<_> = RECORDS
            .iter()
            .filter(|(file, ..)| file == name)
            .map(|record @ (_, heading, stated)| {
                let range = prose::section(text, heading)
                    .unwrap_or_else(|| panic!("{name}: no heading {heading:?}"));
                assert!(
                    text[range.clone()].contains(stated),
                    "{name} {heading:?} does not state its run ({stated:?})"
                );
                (record, range)
            })
            .collect();
        for problem in prose::check(text, results).unwrap() {
            if let Problem::Unquoted(found) = &problem {
                if let Some((record, _)) = records.iter().find(|(_, r)| r.contains(&found.at)) {
                    records_used.insert(*record);
                    continue;
                }
                if let Some(stated) = STATED.iter().find(|(file, figure, stated)| {
                    file == name
                        && *figure == found.figure
                        && paragraph(text, found.at).contains(stated)
                }) {
                    stated_used.insert(stated);
                    continue;
                }
            }
            wrong.push(format!("{name}:{problem}"));
        }
        for link in prose::links(text) {
            if !link.points_to(prose::NODE_BURST_RESULTS) {
                continue;
            }
            for number in numbers(link.text) {
                if !node_burst_held.contains(&number) {
                    wrong.push(format!(
                        "{name}:{}: {number} in [{}](…#{}): not in the node_burst results",
                        prose::line_of(text, link.at.start),
                        link.text,
                        prose::NODE_BURST_RESULTS
                    ));
                }
            }
            node_burst_quotes += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "figures out of place:\n{}",
        wrong.join("\n")
    );
    // The allow-lists hold nothing that no longer stands in the documents.
    let unused: Vec<_> = RECORDS
        .iter()
        .filter(|r| !records_used.contains(r))
        .map(|(file, heading, _)| format!("{file} {heading}"))
        .chain(
            STATED
                .iter()
                .filter(|s| !stated_used.contains(s))
                .map(|(file, figure, _)| format!("{file} {figure}")),
        )
        .collect();
    assert!(unused.is_empty(), "allowed but not found: {unused:?}");
    assert!(marked >= 40, "only {marked} marked figures");
    assert!(node_burst_quotes >= 1, "no quote of the node_burst results");
}

#[test]
fn the_readme_quotes_the_benchmark_through_marked_figures() {
    let readme = read("README.md");
    let cost = &readme[prose::section(&readme, "## Cost and speed").unwrap()];
    let marks: Vec<String> = prose::links(cost)
        .iter()
        .filter_map(|l| l.mark().map(str::to_owned))
        .collect();
    for key in [
        "nodes_200.requests",
        "lifecycle.shutdown_taint",
        "routes.per_route",
        "lb_20.per_lb",
        "leader_start.requests",
        "join.requests",
        "steady_state.per_hour",
        "peak_rss",
    ] {
        assert!(marks.iter().any(|m| m == key), "{key} not in {marks:?}");
    }
    assert_eq!(prose::measured(cost), vec![], "{cost}");
}
