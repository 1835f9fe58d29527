//! The runner's command line, run as a user runs it: a seed replays exactly, bad flags are
//! refused with their name, and a missing CCM binary is a clear error (exit 2), not a panic.
//! (Building this test also builds the runner binary that `scripts/test.sh` runs.)

#![allow(clippy::expect_used)]

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_hcloud-ccm-chaos");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run hcloud-ccm-chaos")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_seed_prints_the_same_schedule_every_time_and_other_seeds_differ() {
    let first = run(&["--print", "--seed", "23"]);
    let again = run(&["--print", "--seed", "23"]);
    let other = run(&["--print", "--seed", "24"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(!first.stdout.is_empty());
    assert_eq!(first.stdout, again.stdout, "a seed replays exactly");
    assert_ne!(first.stdout, other.stdout);
}

#[test]
fn lanes_out_of_range_are_refused_naming_the_flag() {
    for jobs in ["0", "9"] {
        let out = run(&["--print", "--jobs", jobs]);
        assert_eq!(out.status.code(), Some(2), "--jobs {jobs}");
        assert!(
            text(&out.stderr).contains("--jobs"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_missing_ccm_binary_is_an_error_that_says_how_to_build_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("hcloud-ccm");
    let out = run(&[
        "--seed",
        "1",
        "--ccm",
        missing.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stdout);
    assert!(
        said.contains("no hcloud-ccm binary at") && said.contains("--ccm"),
        "{said}"
    );
}
