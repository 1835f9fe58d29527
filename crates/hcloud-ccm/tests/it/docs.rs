//! docs/configuration.md carries the exact `hcloud-ccm --help` text; this test keeps the two
//! from drifting. After changing a flag, regenerate with
//! `UPDATE_DOCS=1 cargo test -p hcloud-ccm --test it docs::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

const BEGIN: &str = "<!-- BEGIN hcloud-ccm --help -->\n```text\n";
const END: &str = "```\n<!-- END hcloud-ccm --help -->";

#[test]
fn configuration_reference_matches_help() {
    let output = Command::new(env!("CARGO_BIN_EXE_hcloud-ccm"))
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    let help: String = help
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();

    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
    let end = doc.find(END).expect("end marker");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], help, &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        doc[start..end] == help,
        "docs/configuration.md is out of date with --help; regenerate with UPDATE_DOCS=1 cargo test -p hcloud-ccm --test it docs::"
    );
}
