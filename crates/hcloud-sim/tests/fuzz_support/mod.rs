//! What every `tests/fuzz.rs` of the workspace shares (each includes this file with
//! `#[path]`): the number of cases, the seed and an allocation meter.
//!
//! Modes (see `docs/fuzzing.md`):
//! - short (the default, part of `cargo test`): each target runs its own small number of cases
//!   from a fixed seed, so a run is repeatable;
//! - long: `HCLOUD_FUZZ_CASES=1000000` sets the cases of every target, and the seed is random
//!   unless `PROPTEST_RNG_SEED` fixes it.
//!
//! Failures are not written to `proptest-regressions` files: a crash found becomes a unit
//! test with its minimal input next to the code it broke.

#![allow(dead_code)] // not every fuzz file uses every helper

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// Environment variable that sets the number of cases of every target (the long mode).
pub const CASES_VARIABLE: &str = "HCLOUD_FUZZ_CASES";

/// Seed of the short mode.
const SHORT_MODE_SEED: u64 = 0x6863_6c6f_7564;

/// The runner configuration of a target whose short mode runs `short_cases` cases.
pub fn config(short_cases: u32) -> Config {
    let long = std::env::var(CASES_VARIABLE)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok());
    let seeded = std::env::var_os("PROPTEST_RNG_SEED").is_some();
    let mut config = Config {
        cases: long.unwrap_or(short_cases),
        failure_persistence: None,
        // A failing case of the long mode shrinks within seconds, not hours.
        max_shrink_iters: 20_000,
        ..Config::default()
    };
    if long.is_none() && !seeded {
        config.rng_seed = RngSeed::Fixed(SHORT_MODE_SEED);
    }
    config
}

thread_local! {
    /// Bytes this thread allocated and has not freed (may go negative when it frees what
    /// another thread allocated).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the last [`measure`] started.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting the live bytes of each thread.
#[derive(Debug)]
pub struct CountingAllocator;

fn record(delta: isize) {
    // `try_with`: during thread teardown the counters may be gone; that memory is not measured.
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(delta);
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

fn size(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// The one unsafe item of the fuzz tests: forwarding to the system allocator is what an
// allocation meter is; the counters are plain thread-locals.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(size(layout));
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(size(layout));
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(-size(layout));
        // SAFETY: as above; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the most bytes it held at once on this thread
/// (beyond what the thread held before). Work on other threads is not seen: the targets run
/// their code on the calling thread (a current-thread runtime where async).
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, usize::try_from(peak - start).unwrap_or(0))
}

/// The allocation a target may make for an input of `input_bytes`: `per_byte` times its size
/// plus a fixed `base` (the code's own structures). More than that is "unbounded".
pub fn allowance(input_bytes: usize, per_byte: usize, base: usize) -> usize {
    input_bytes.saturating_mul(per_byte).saturating_add(base)
}

/// Any text: arbitrary Unicode, printable ASCII, or bytes read leniently as UTF-8.
pub fn soup() -> BoxedStrategy<String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        proptest::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
    .boxed()
}

/// One of `words`.
pub fn word(words: &'static [&'static str]) -> BoxedStrategy<String> {
    proptest::sample::select(words)
        .prop_map(str::to_owned)
        .boxed()
}

/// Label keys and values, valid or nearly so.
pub fn label_word() -> BoxedStrategy<String> {
    prop_oneof![
        word(&[
            "role",
            "zone",
            "worker",
            "fsn1",
            "env",
            "prod",
            "example.com/gpu",
            "hcloud-ccm/service-uid",
            "a",
            "",
        ]),
        "[a-zA-Z0-9._-]{0,8}",
        "[a-z]{1,3}(\\.[a-z]{1,3})?/[a-z]{1,3}",
    ]
    .boxed()
}

/// Label selectors near the grammar: every operator, set expressions, stray parentheses,
/// commas and whitespace.
pub fn near_selector() -> BoxedStrategy<String> {
    let requirement = prop_oneof![
        label_word(),
        label_word().prop_map(|k| format!("!{k}")),
        (label_word(), word(&["=", "==", "!=", " = "]), label_word())
            .prop_map(|(k, op, v)| format!("{k}{op}{v}")),
        (
            label_word(),
            word(&[" in ", " notin ", " in", " IN ", "in ", " foo "]),
            word(&["(", "", "(("]),
            proptest::collection::vec(label_word(), 0..3),
            word(&[")", "", "))"]),
        )
            .prop_map(|(k, op, open, values, close)| format!(
                "{k}{op}{open}{}{close}",
                values.join(",")
            )),
    ];
    proptest::collection::vec(requirement, 0..4)
        .prop_map(|parts| parts.join(","))
        .boxed()
}
