//! One source of numbers: the results block of `docs/benchmarks.md` is what
//! `hcloud-ccm-bench --write-results` writes (its figures derived from its own table, none typed
//! by hand), and every number the README and the other documents quote from a benchmark — as a
//! link to `benchmarks.md#latest-results` (the runner's block) or `benchmarks.md#results` (the
//! `node_burst` bench's table) — is one that block or table holds. The README's "Cost and speed"
//! section quotes no measured number outside such a link.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hcloud_ccm_bench::{block, find_block, numbers, quoted_numbers, read_block};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap()
}

/// The text of the section under `heading` (up to the next heading of its level or above).
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no heading {heading:?}"))
        + 1;
    let body = &doc[start + heading.len()..];
    let end = body
        .match_indices("\n#")
        .find(|(i, _)| {
            let hashes = body[i + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && body[i + 1 + hashes..].starts_with(' ')
        })
        .map_or(body.len(), |(i, _)| i);
    &doc[start..start + heading.len() + end]
}

/// Every document that may quote a benchmark.
fn documents() -> Vec<(String, String)> {
    let mut docs = vec![("README.md".to_owned(), read("README.md"))];
    let mut files: Vec<_> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".md"))
        .collect();
    files.sort();
    for file in files {
        let path = format!("docs/{file}");
        let text = read(&path);
        docs.push((path, text));
    }
    docs
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
fn every_quoted_benchmark_number_is_in_the_results() {
    let benchmarks = read("docs/benchmarks.md");
    let sources = [
        (
            "benchmarks.md#latest-results",
            find_block(&benchmarks).unwrap().to_owned(),
        ),
        (
            "benchmarks.md#results",
            section(&benchmarks, "### Results").to_owned(),
        ),
    ];
    let mut quoted = 0;
    let mut wrong = Vec::new();
    for (name, text) in documents() {
        for (target, source) in &sources {
            let held: BTreeSet<String> = numbers(source).into_iter().collect();
            // A link without a number only points to the results.
            for (link, numbers) in quoted_numbers(&text, target) {
                for number in numbers {
                    quoted += 1;
                    if !held.contains(&number) {
                        wrong.push(format!("{name}: {number} in [{link}]({target})"));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "numbers the benchmark results do not hold:\n{}",
        wrong.join("\n")
    );
    assert!(quoted >= 20, "only {quoted} numbers quoted");
}

#[test]
fn the_readme_quotes_measured_numbers_only_as_links() {
    let readme = read("README.md");
    let cost = section(&readme, "## Cost and speed");
    // Link texts of benchmark links removed, the rest may hold no number with a measured unit.
    let mut rest = cost.to_owned();
    for target in ["benchmarks.md#latest-results", "benchmarks.md#results"] {
        for (link, _) in quoted_numbers(cost, target) {
            rest = rest.replace(&format!("[{link}]"), "[]");
        }
    }
    // A period ("per 10 s", "every 15 s") is a setting, not a measurement.
    let mut unlinked = Vec::new();
    let words: Vec<&str> = rest.split_whitespace().collect();
    for triple in words.windows(3) {
        let [before, number, unit] = triple else {
            continue;
        };
        let unit = unit.trim_end_matches([',', '.', ')', ';', ':']);
        if ["s", "ms", "MiB", "MB"].contains(&unit)
            && !["per", "every"].contains(before)
            && number.trim_start_matches(['(', '[']).parse::<f64>().is_ok()
        {
            unlinked.push(format!("{number} {unit}"));
        }
    }
    assert!(
        unlinked.is_empty(),
        "README \"Cost and speed\" quotes measured numbers without a link to the results: {unlinked:?}"
    );
    assert!(cost.contains("benchmarks.md#latest-results"), "{cost}");
}

#[test]
fn a_number_the_results_do_not_hold_is_found() {
    // The check above, on a document that quotes a wrong number.
    let doc = "[7.77 requests per route](docs/benchmarks.md#latest-results)";
    let quoted = quoted_numbers(doc, "benchmarks.md#latest-results");
    let block = find_block(&read("docs/benchmarks.md")).unwrap().to_owned();
    let held: BTreeSet<String> = numbers(&block).into_iter().collect();
    assert_eq!(quoted[0].1, vec!["7.77".to_owned()]);
    assert!(!held.contains("7.77"));
    assert!(held.contains("2.02"));
}
