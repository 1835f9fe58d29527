//! Fuzzing of the binary's value parsers: Go durations (every duration flag and variable),
//! and, as cheap extras, `--feature-gates` and `--cluster-cidr`.
//!
//! Short mode in `cargo test`; the long mode and what it found are in `docs/fuzzing.md`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

#[path = "../../../hcloud-sim/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::time::Duration;

use hcloud_ccm::config::{GoDuration, parse_cluster_cidrs, parse_feature_gates, parse_go_duration};
use hcloud_provider::load_balancers::annotations::parse_duration as annotation_duration;
use proptest::prelude::*;

use fuzz_support::soup;

// The allocator of the whole test binary: it forwards to the system's and only counts, per
// thread, which the other tests never read.
#[global_allocator]
static ALLOCATOR: fuzz_support::CountingAllocator = fuzz_support::CountingAllocator;

/// The largest duration Go has (`math.MaxInt64` nanoseconds).
const GO_MAX_NANOS: u128 = i64::MAX as u128;

/// Go durations near the grammar: signs, fractions, every unit (and unknown ones), huge
/// numbers, several parts.
fn near_duration() -> BoxedStrategy<String> {
    let number = prop_oneof![
        "[0-9]{0,3}",
        "[0-9]{15,40}",
        any::<u64>().prop_map(|n| n.to_string()),
        Just(i64::MAX.to_string()),
    ];
    let part = (
        number,
        proptest::option::of("\\.[0-9]{0,35}"),
        proptest::sample::select(
            &[
                "ns", "us", "\u{b5}s", "\u{3bc}s", "ms", "s", "m", "h", "", "d", "sec", "H", ".",
            ][..],
        ),
    )
        .prop_map(|(int, frac, unit)| format!("{int}{}{unit}", frac.unwrap_or_default()));
    (
        proptest::sample::select(&["", "", "+", "-", "--", " "][..]),
        proptest::collection::vec(part, 1..5),
    )
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()))
        .boxed()
}

fn durations() -> BoxedStrategy<String> {
    prop_oneof![4 => near_duration(), 1 => soup()].boxed()
}

proptest! {
    #![proptest_config(fuzz_support::config(5_000))]

    /// A Go duration parses or is refused with an error that quotes it, never panics or
    /// allocates beyond its size; what parses fits Go's `time.Duration` and prints (as Go
    /// prints it) to a text that parses back to the same duration.
    #[test]
    fn go_durations(text in durations()) {
        let (parsed, bytes) = fuzz_support::measure(|| parse_go_duration(&text));
        prop_assert!(bytes <= fuzz_support::allowance(text.len(), 4, 1024), "{bytes} bytes");
        match parsed {
            Ok(d) => {
                prop_assert!(d.as_nanos() <= GO_MAX_NANOS, "{text:?} -> {d:?}");
                let printed = GoDuration(d).to_string();
                prop_assert_eq!(parse_go_duration(&printed), Ok(d), "printed as {}", printed);
            }
            Err(err) => {
                let message = err.to_string();
                prop_assert!(text.is_empty() || message.contains(&format!("{text:?}")), "{message}");
            }
        }
    }

    /// Every duration `GoDuration` prints parses back to itself.
    #[test]
    fn go_duration_display_round_trips(secs in 0u64..=(i64::MAX as u64 / 1_000_000_000), nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        if d.as_nanos() <= GO_MAX_NANOS {
            prop_assert_eq!(parse_go_duration(&GoDuration(d).to_string()), Ok(d));
        }
    }

    /// The load balancer annotations read durations as Go does, and besides a bare
    /// non-negative whole number as seconds (the unit of the API's fields); nothing else
    /// differs, whatever the text.
    #[test]
    fn annotation_durations_are_go_durations_or_bare_seconds(text in prop_oneof![near_duration(), soup(), "[0-9]{1,25}"]) {
        let trimmed = text.trim();
        let expected = match trimmed.parse::<u64>() {
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(_) => parse_go_duration(trimmed).ok(),
        };
        prop_assert_eq!(annotation_duration(&text), expected, "{:?}", text);
    }

    /// `--feature-gates` and `--cluster-cidr` parse or are refused, never panic.
    #[test]
    fn feature_gates_and_cluster_cidrs(text in prop_oneof![
        soup(),
        "([A-Za-z]{1,12}=(true|false|TRUE|1|maybe|)(, ?)?){0,4}",
        "([0-9a-f:.]{0,20}(/[0-9]{0,3})?,?){0,3}",
    ]) {
        if let Ok((_, unknown)) = parse_feature_gates(&text) {
            prop_assert!(unknown.iter().all(|name| text.contains(name.as_str())));
        }
        if let Ok(cidrs) = parse_cluster_cidrs(&text) {
            prop_assert!(!cidrs.is_empty());
        }
    }
}
