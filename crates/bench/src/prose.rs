//! The figures of the documents' prose: the marked ones, which [`write_figures`] rewrites from
//! the results block, and the measured ones that are neither marked nor linked, which [`check`]
//! reports.
//!
//! A marked figure is a Markdown link to the results section whose title names the figure:
//! `[23 requests](docs/benchmarks.md#latest-results "bench:leader_start.requests")`. Its text
//! is the figure's value exactly as the block's figures table has it.
//!
//! A measured figure, as [`measured`] finds it, is a number followed by a unit of time, memory,
//! requests, rate, CPU time or percent (`6.3 s`, `26.8 MiB`, `2.02 requests`, `460 writes/s`,
//! `35 %`) that has a decimal fraction or follows a percentile or maximum (`p50 892 ms`), and
//! any duration of minutes and seconds (`25 min 46 s`). Whole numbers elsewhere are the
//! settings, limits and sums the documents explain (`every 15 s`, `100 routes`, `4 requests`);
//! a number after "per" or "every" is a period; a range (`0.5–2.5 s`) is a setting's bounds.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::{Figure, ResultsError, figures, find_block, numbers, read_block};

/// The anchor of the results section (`### Latest results` of `docs/benchmarks.md`).
pub const RESULTS: &str = "latest-results";
/// The anchor of the `node_burst` bench's results (`### Results` of `docs/benchmarks.md`).
pub const NODE_BURST_RESULTS: &str = "results";
/// How the title of a marked figure's link begins; the figure's key follows.
pub const MARK: &str = "bench:";

/// A Markdown inline link: `[text](destination "title")`.
#[derive(Debug, Clone, PartialEq)]
pub struct Link<'a> {
    /// The link text.
    pub text: &'a str,
    /// Where the text is in the document.
    pub text_at: Range<usize>,
    /// The destination, without the title.
    pub destination: &'a str,
    /// The title, without its quotes.
    pub title: Option<&'a str>,
    /// Where the whole link is in the document.
    pub at: Range<usize>,
}

impl Link<'_> {
    /// Whether the link points to `anchor` of `benchmarks.md` (or of the document itself).
    pub fn points_to(&self, anchor: &str) -> bool {
        self.destination
            .split_once('#')
            .is_some_and(|(path, fragment)| {
                fragment == anchor && (path.is_empty() || path.ends_with("benchmarks.md"))
            })
    }

    /// The key of a marked figure: the title after [`MARK`], on a link to the results.
    pub fn mark(&self) -> Option<&str> {
        self.title
            .and_then(|t| t.strip_prefix(MARK))
            .filter(|_| self.points_to(RESULTS))
    }
}

/// The ranges of `doc` in code: spans between runs of backticks of equal length (so fenced
/// blocks too).
fn code(doc: &str) -> Vec<Range<usize>> {
    let bytes = doc.as_bytes();
    let run = |at: usize| bytes[at..].iter().take_while(|b| **b == b'`').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let mut closed = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let m = run(j);
                if m == n {
                    closed = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                out.push(i..end);
                i = end;
            }
            None => i += n,
        }
    }
    out
}

fn inside(ranges: &[Range<usize>], at: usize) -> bool {
    ranges.iter().any(|r| r.contains(&at))
}

/// Every inline link of `doc` outside code.
pub fn links(doc: &str) -> Vec<Link<'_>> {
    let code = code(doc);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = doc[from..].find('[').map(|i| i + from) {
        from = open + 1;
        if inside(&code, open) {
            continue;
        }
        let after = &doc[open + 1..];
        let Some(close) = after.find(']') else {
            break;
        };
        let text = &after[..close];
        if text.contains('[') || !after[close + 1..].starts_with('(') {
            continue;
        }
        let inner_at = open + 1 + close + 2;
        let Some(end) = doc[inner_at..].find(')').map(|i| i + inner_at) else {
            break;
        };
        let inner = doc[inner_at..end].trim();
        let (destination, title) = match inner.split_once(char::is_whitespace) {
            Some((d, t)) => (d, Some(t.trim().trim_matches('"'))),
            None => (inner, None),
        };
        out.push(Link {
            text,
            text_at: open + 1..open + 1 + close,
            destination,
            title,
            at: open..end + 1,
        });
        from = end + 1;
    }
    out
}

/// Where the results block of `doc` is, if it has one.
fn block_range(doc: &str) -> Option<Range<usize>> {
    let block = find_block(doc).ok()?;
    let start = block.as_ptr() as usize - doc.as_ptr() as usize;
    Some(start..start + block.len())
}

/// The links of `doc` outside its results block (whose own text is generated).
fn quotes(doc: &str) -> Vec<Link<'_>> {
    let block = block_range(doc);
    links(doc)
        .into_iter()
        .filter(|l| !block.as_ref().is_some_and(|b| b.contains(&l.at.start)))
        .collect()
}

/// The line (from 1) of byte `at` of `doc`.
pub fn line_of(doc: &str, at: usize) -> usize {
    doc[..at].matches('\n').count() + 1
}

/// The range of the section under `heading` (a whole line, `## Name`), up to the next heading
/// of its level or above.
pub fn section(doc: &str, heading: &str) -> Option<Range<usize>> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = if doc.starts_with(&format!("{heading}\n")) {
        0
    } else {
        doc.find(&format!("\n{heading}\n"))? + 1
    };
    let body = start + heading.len();
    let end = doc[body..]
        .match_indices("\n#")
        .find(|(i, _)| {
            let at = body + i + 1;
            let hashes = doc[at..].chars().take_while(|c| *c == '#').count();
            hashes <= level && doc[at + hashes..].starts_with(' ')
        })
        .map_or(doc.len(), |(i, _)| body + i + 1);
    Some(start..end)
}

/// A measured figure found in a document's prose.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Where it starts in the document.
    pub at: usize,
    /// Its line, from 1.
    pub line: usize,
    /// The figure as written, number and unit (`6.3 s`).
    pub figure: String,
}

const UNITS: &[&str] = &[
    "ms",
    "s",
    "min",
    "h",
    "KiB",
    "MiB",
    "GiB",
    "KB",
    "MB",
    "GB",
    "request",
    "requests",
    "requests/h",
    "requests/hour",
    "writes/s",
    "CPU-s",
    "CPU-seconds",
    "%",
];

/// A word without the punctuation and emphasis around it, and without the destination of a
/// link it ends (`s](other.md)` is `s`).
fn bare(word: &str) -> &str {
    let word = word.split_once("](").map_or(word, |(text, _)| text);
    word.trim_start_matches(['(', '[', '*', '_'])
        .trim_end_matches([',', '.', ';', ':', ')', ']', '*', '_', '!', '?'])
}

/// The number a word is (digits with at most one decimal point), as written.
fn number(word: &str) -> Option<&str> {
    let n = bare(word);
    let mut parts = n.split('.');
    let whole = parts.next()?;
    let fraction = parts.next();
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    (digits(whole) && fraction.is_none_or(digits) && parts.next().is_none()).then_some(n)
}

/// The measured figures of `doc` (see the module's documentation) in the order they stand:
/// outside its results block, outside code (commands and their output), and outside its links
/// to the results and to the `node_burst` results (which [`check`] checks as quotes).
pub fn measured(doc: &str) -> Vec<Found> {
    let mut skip: Vec<Range<usize>> = quotes(doc)
        .into_iter()
        .filter(|l| l.points_to(RESULTS) || l.points_to(NODE_BURST_RESULTS))
        .map(|l| l.at)
        .collect();
    skip.extend(block_range(doc));
    skip.extend(code(doc));
    let words: Vec<(usize, &str)> = doc
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - doc.as_ptr() as usize, w))
        .collect();
    let unit = |i: usize| {
        words
            .get(i)
            .map(|(_, w)| bare(w))
            .filter(|u| UNITS.contains(u))
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (at, word) = words[i];
        let found = (|| {
            if inside(&skip, at) {
                return None;
            }
            let n = number(word)?;
            let u = unit(i + 1)?;
            let before = i
                .checked_sub(1)
                .map(|j| bare(words[j].1).to_lowercase())
                .unwrap_or_default();
            if ["per", "every"].contains(&before.as_str()) {
                return None;
            }
            if u == "min"
                && !n.contains('.')
                && words.get(i + 2).and_then(|(_, w)| number(w)).is_some()
                && unit(i + 3) == Some("s")
            {
                let seconds = number(words[i + 2].1)?;
                return Some((format!("{n} min {seconds} s"), 4));
            }
            let cue = ["p50", "p90", "p99", "max"].contains(&before.as_str());
            (n.contains('.') || cue).then(|| (format!("{n} {u}"), 2))
        })();
        match found {
            Some((figure, len)) => {
                out.push(Found {
                    at,
                    line: line_of(doc, at),
                    figure,
                });
                i += len;
            }
            None => i += 1,
        }
    }
    out
}

/// Why a figure of a document is wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// A marked figure whose key the results block does not have.
    UnknownKey {
        /// Its line.
        line: usize,
        /// The key.
        key: String,
    },
    /// A marked figure whose text is not the block's value.
    Differs {
        /// Its line.
        line: usize,
        /// The key.
        key: String,
        /// The text.
        text: String,
        /// The block's value.
        value: String,
    },
    /// A number in a link to the results (not marked) that the block does not hold.
    NotHeld {
        /// Its line.
        line: usize,
        /// The number.
        number: String,
        /// The link's text.
        text: String,
    },
    /// A measured figure in prose, neither marked nor linked.
    Unquoted(Found),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKey { line, key } => {
                write!(
                    f,
                    "{line}: `{MARK}{key}`: the results block has no such figure"
                )
            }
            Self::Differs {
                line,
                key,
                text,
                value,
            } => write!(
                f,
                "{line}: {text:?} marked `{MARK}{key}`: the results block says {value:?} \
                 (`hcloud-ccm-bench --refresh-results docs/benchmarks.md` rewrites it)"
            ),
            Self::NotHeld { line, number, text } => write!(
                f,
                "{line}: {number} in [{text}](…#{RESULTS}): not in the results block"
            ),
            Self::Unquoted(found) => write!(
                f,
                "{}: {}: a measured figure that is neither a marked figure of the results block \
                 (`[value](benchmarks.md#{RESULTS} \"{MARK}key\")`) nor a linked quote of it",
                found.line, found.figure
            ),
        }
    }
}

/// The problems of `doc` against the results block `block` (markers included): every marked
/// figure must be the block's value, every number in another link to the results one the
/// block holds, and every measured figure of the prose (see [`measured`]) one of those two.
pub fn check(doc: &str, block: &str) -> Result<Vec<Problem>, ResultsError> {
    let (_, table) = read_block(block)?;
    let figures = figures(&table);
    let held: BTreeSet<String> = numbers(block).into_iter().collect();
    let mut out = Vec::new();
    for link in quotes(doc) {
        let line = line_of(doc, link.at.start);
        if let Some(key) = link.mark() {
            match figures.iter().find(|f| f.key == key) {
                None => out.push(Problem::UnknownKey {
                    line,
                    key: key.to_owned(),
                }),
                Some(f) if f.value != link.text => out.push(Problem::Differs {
                    line,
                    key: key.to_owned(),
                    text: link.text.to_owned(),
                    value: f.value.clone(),
                }),
                Some(_) => {}
            }
        } else if link.points_to(RESULTS) {
            for number in numbers(link.text) {
                if !held.contains(&number) {
                    out.push(Problem::NotHeld {
                        line,
                        number,
                        text: link.text.to_owned(),
                    });
                }
            }
        }
    }
    out.extend(measured(doc).into_iter().map(Problem::Unquoted));
    Ok(out)
}

/// `doc` (named `file` in errors) with the text of every marked figure replaced by the
/// figure's value.
pub fn rewrite(file: &str, doc: &str, figures: &[Figure]) -> Result<String, ResultsError> {
    let mut out = String::with_capacity(doc.len());
    let mut from = 0;
    for link in quotes(doc) {
        let Some(key) = link.mark() else {
            continue;
        };
        let figure =
            figures
                .iter()
                .find(|f| f.key == key)
                .ok_or_else(|| ResultsError::UnknownFigure {
                    file: file.to_owned(),
                    line: line_of(doc, link.at.start),
                    key: key.to_owned(),
                })?;
        out.push_str(&doc[from..link.text_at.start]);
        out.push_str(&figure.value);
        from = link.text_at.end;
    }
    out.push_str(&doc[from..]);
    Ok(out)
}

/// The documents that may quote the results of `results_doc` (`docs/benchmarks.md`): the
/// Markdown files beside it and the README one directory up, in that order, sorted.
pub fn documents(results_doc: &Path) -> Result<Vec<PathBuf>, ResultsError> {
    let dir = match results_doc.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ResultsError::Io { path, source }
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let path = entry.map_err(io(&dir))?.path();
        if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.sort();
    let readme = match dir.parent() {
        Some(up) if dir != Path::new(".") => up.join("README.md"),
        _ => dir.join("../README.md"),
    };
    if readme.exists() {
        out.push(readme);
    }
    Ok(out)
}

/// Rewrite every marked figure of the documents beside `results_doc` (see [`documents`]) from
/// its results block; the paths of the documents that changed. Nothing is written when a
/// document marks a figure the block does not have.
pub fn write_figures(results_doc: &Path) -> Result<Vec<PathBuf>, ResultsError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    let text = read(results_doc)?;
    let (_, table) = read_block(find_block(&text)?)?;
    let figures = figures(&table);
    let mut changed = Vec::new();
    for path in documents(results_doc)? {
        let old = read(&path)?;
        let new = rewrite(&path.display().to_string(), &old, &figures)?;
        if new != old {
            changed.push((path, new));
        }
    }
    for (path, new) in &changed {
        std::fs::write(path, new).map_err(|source| ResultsError::Io {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(changed.into_iter().map(|(p, _)| p).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Row, block, table};

    /// A results block of three rows: a power-off, a leader start, a burst of Services.
    fn results() -> String {
        let mut off = Row {
            scenario: "a server powers off".into(),
            latency: "shutdown taint after 6.3 s".into(),
            ..Row::default()
        };
        off.counts.insert("GET /servers".into(), 24);
        let mut leader = Row {
            scenario: "leader start, 1000 Nodes and 100 unchanged Services in place".into(),
            latency: "requests until idle (5 s without one)".into(),
            rss: Some((34611, 34611)),
            ..Row::default()
        };
        leader.counts.insert("GET /servers".into(), 23);
        let mut burst = Row {
            scenario: "20 new LoadBalancer Services at once (2 ports)".into(),
            latency: "ingress 20/20: p50 1.5 s, p99 1.7 s (<= 5 s ok)".into(),
            ..Row::default()
        };
        burst.counts.insert("POST /load_balancers".into(), 43);
        block("Run: test.", &table(&[off, leader, burst]))
    }

    fn problems(doc: &str) -> Vec<String> {
        check(doc, &results())
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_measured_figure_in_prose_fails_with_its_line() {
        let doc = "# Doc\n\nThe taint came after 6.3 s, and the\nburst had p50 892 ms.\n";
        let found = problems(doc);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("3: 6.3 s: a measured figure"),
            "{found:?}"
        );
        assert!(found[1].starts_with("4: 892 ms: "), "{found:?}");
    }

    #[test]
    fn settings_sums_and_ranges_are_no_measurements() {
        let doc = "Checked every 15 s, a 5 s timeout, 100 routes, 4 requests for 200 servers, \
                   tried again 0.5–2.5 s later, at most 1 request per 1.5 s, `6.3 s` in code.";
        assert_eq!(measured(doc), vec![]);
        let times = measured("took 25 min 46 s (p99 18.1 s, max 53 ms), 12 min of it");
        let figures: Vec<&str> = times.iter().map(|f| f.figure.as_str()).collect();
        assert_eq!(figures, ["25 min 46 s", "18.1 s", "53 ms"]);
    }

    #[test]
    fn a_linked_quote_of_the_block_passes_and_a_wrong_one_fails() {
        let doc = "A [shutdown taint after 6.3 s](docs/benchmarks.md#latest-results), \
                   ingress [p50 1.5 s](#latest-results).\n";
        assert_eq!(problems(doc), Vec::<String>::new());
        let wrong = problems("A [taint after 7.77 s](benchmarks.md#latest-results).");
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(
            wrong[0].contains("7.77 in [taint after 7.77 s]"),
            "{wrong:?}"
        );
        // A link elsewhere is no quote of the block.
        let elsewhere = problems("A [taint after 6.3 s](configuration.md#latest-results).");
        assert_eq!(elsewhere.len(), 1, "{elsewhere:?}");
        assert!(elsewhere[0].starts_with("1: 6.3 s: "), "{elsewhere:?}");
    }

    #[test]
    fn a_marked_figure_must_be_the_block_s_value() {
        let right = "A leader start costs \
                     [23 requests](../docs/benchmarks.md#latest-results \"bench:leader_start.requests\") \
                     and peaks at [33.8 MiB](#latest-results \"bench:leader_start.peak_rss\").";
        assert_eq!(problems(right), Vec::<String>::new());
        let differs = problems(&right.replace("[23 requests]", "[25 requests]"));
        assert_eq!(differs.len(), 1, "{differs:?}");
        assert!(
            differs[0].contains(
                "\"25 requests\" marked `bench:leader_start.requests`: \
                 the results block says \"23 requests\""
            ),
            "{differs:?}"
        );
        let unknown = problems("[4 s](benchmarks.md#latest-results \"bench:nothing\")");
        assert!(
            unknown[0].contains("`bench:nothing`: the results block has no such figure"),
            "{unknown:?}"
        );
    }

    #[test]
    fn a_rewrite_updates_every_marked_figure_and_nothing_else() {
        let doc = "Taint after [5.7 s](benchmarks.md#latest-results \"bench:lifecycle.shutdown_taint\"); \
                   [9.9 s](other.md \"bench:lifecycle.shutdown_taint\") stays, \
                   so does `[1 s](#latest-results \"bench:x\")`; p99 [2 s](#latest-results \"bench:lb_20.p99\").\n";
        let (_, text) = read_block(&results()).unwrap();
        let new = rewrite("doc.md", doc, &figures(&text)).unwrap();
        assert_eq!(
            new,
            doc.replace("[5.7 s]", "[6.3 s]")
                .replace("[2 s]", "[1.7 s]")
        );
        // The figure in the link elsewhere is no quote of the block.
        let left: Vec<String> = problems(&new).iter().map(|p| p[..8].to_owned()).collect();
        assert_eq!(left, ["1: 9.9 s"]);
        let err = rewrite(
            "doc.md",
            "\n[1 s](#latest-results \"bench:gone\")",
            &figures(&text),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "doc.md:2: the results block has no figure `gone`"
        );
    }

    #[test]
    fn write_figures_rewrites_the_documents_beside_the_results_and_the_readme() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        let results_doc = dir.path().join("docs/benchmarks.md");
        let mark = |old: &str| {
            format!(
                "after [{old}](benchmarks.md#latest-results \"bench:lifecycle.shutdown_taint\")\n"
            )
        };
        std::fs::write(
            &results_doc,
            format!("# B\n\n{}\n\n{}", results(), mark("1 s")),
        )
        .unwrap();
        std::fs::write(dir.path().join("docs/other.md"), mark("2 s")).unwrap();
        std::fs::write(dir.path().join("docs/same.md"), mark("6.3 s")).unwrap();
        std::fs::write(dir.path().join("README.md"), mark("3 s")).unwrap();
        let changed = write_figures(&results_doc).unwrap();
        let names: Vec<String> = changed
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["docs/benchmarks.md", "docs/other.md", "README.md"]);
        for path in ["docs/other.md", "docs/same.md", "README.md"] {
            let text = std::fs::read_to_string(dir.path().join(path)).unwrap();
            assert_eq!(text, mark("6.3 s"), "{path}");
        }
        let text = std::fs::read_to_string(&results_doc).unwrap();
        assert!(text.ends_with(&mark("6.3 s")), "{text}");
        // A mark the block does not have stops the rewrite before anything is written.
        std::fs::write(
            dir.path().join("docs/other.md"),
            "[2 s](benchmarks.md#latest-results \"bench:gone\")",
        )
        .unwrap();
        std::fs::write(dir.path().join("README.md"), mark("3 s")).unwrap();
        assert!(matches!(
            write_figures(&results_doc),
            Err(ResultsError::UnknownFigure { line: 1, .. })
        ));
        let readme = std::fs::read_to_string(dir.path().join("README.md")).unwrap();
        assert_eq!(readme, mark("3 s"));
    }

    #[test]
    fn sections_end_at_the_next_heading_of_their_level() {
        let doc = "# T\n## A\na\n### A1\nb\n## B\nc\n";
        let a = section(doc, "## A").unwrap();
        assert_eq!(&doc[a], "## A\na\n### A1\nb\n");
        assert_eq!(&doc[section(doc, "## B").unwrap()], "## B\nc\n");
        assert_eq!(section(doc, "## C"), None);
    }
}
