//! Embeds the commit the binary is built from, for `hcloud-ccm --version`: `HCLOUD_CCM_COMMIT`
//! when set (scripts/image.sh passes it, with `-dirty` for a work tree with changes), otherwise
//! `git rev-parse HEAD`, otherwise `unknown` (a source archive without git).

// Cargo reads a build script's instructions from its standard output.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn main() {
    println!("cargo::rerun-if-env-changed=HCLOUD_CCM_COMMIT");
    let commit = match std::env::var("HCLOUD_CCM_COMMIT") {
        Ok(commit) if !commit.is_empty() => commit,
        _ => {
            // Rebuild when HEAD moves: its file, and the branch it names (in the common git
            // directory of a worktree).
            if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
                println!(
                    "cargo::rerun-if-changed={}",
                    PathBuf::from(&dir).join("HEAD").display()
                );
            }
            if let (Some(common), Some(head)) = (
                git(&["rev-parse", "--git-common-dir"]),
                git(&["symbolic-ref", "-q", "HEAD"]),
            ) {
                // Only files that exist: cargo takes a missing one as changed and would
                // rebuild the crate on every build (a repository without packed refs, a branch
                // whose ref lives only in packed-refs).
                for path in [
                    PathBuf::from(&common).join(&head),
                    PathBuf::from(&common).join("packed-refs"),
                ] {
                    if path.exists() {
                        println!("cargo::rerun-if-changed={}", path.display());
                    }
                }
            }
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo::rustc-env=HCLOUD_CCM_COMMIT={commit}");
}
