//! The secrets the CCM is given, and the search for them in everything a schedule produced
//! (the CCM's logs, the cluster's events, `/metrics`, the runner's event log and errors).

use std::path::{Path, PathBuf};

/// The API token: recognisable and of the real length (64 characters).
pub const API_TOKEN: &str = "chaosTOKENchaosTOKENchaosTOKENchaosTOKENchaosTOKENchaosTOKEN1234";
/// The Robot user (not a secret, but given with the password).
pub const ROBOT_USER: &str = "chaos-robot-user";
/// The Robot password.
pub const ROBOT_PASSWORD: &str = "chaos-ROBOT-password-5f1e";

/// The secrets searched for, by name. The token's first half is searched too, so that a
/// shortened or split token is found as well.
pub fn secrets() -> [(&'static str, &'static str); 3] {
    [
        ("API token", API_TOKEN),
        ("API token (first half)", &API_TOKEN[..32]),
        ("Robot password", ROBOT_PASSWORD),
    ]
}

/// One occurrence of a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Which secret.
    pub secret: &'static str,
    /// Where: a file, or what was searched.
    pub source: String,
    /// 1-based line number.
    pub line: usize,
}

/// The occurrences of the secrets in `text`, `source` naming it.
pub fn scan_text(text: &str, source: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for (secret, value) in secrets() {
            if line.contains(value) {
                hits.push(Hit {
                    secret,
                    source: source.to_owned(),
                    line: index + 1,
                });
            }
        }
    }
    hits
}

/// The occurrences of the secrets in every file under `dir`, and the number of bytes read.
pub fn scan_dir(dir: &Path) -> std::io::Result<(Vec<Hit>, u64)> {
    let mut hits = Vec::new();
    let mut bytes = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
            continue;
        }
        let data = std::fs::read(&path)?;
        bytes += data.len() as u64;
        hits.extend(scan_text(
            &String::from_utf8_lossy(&data),
            &path.display().to_string(),
        ));
    }
    Ok((hits, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_secret_where_it_is() {
        let dir = std::env::temp_dir().join(format!("chaos-secrets-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("clean.log"), "nothing\nto see\n").unwrap();
        std::fs::write(
            dir.join("sub/leak.log"),
            format!("ok\nauthorization: Bearer {API_TOKEN}\npassword={ROBOT_PASSWORD}\n"),
        )
        .unwrap();
        let (hits, bytes) = scan_dir(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(bytes > 0);
        let mut found: Vec<(&str, usize)> = hits.iter().map(|h| (h.secret, h.line)).collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                ("API token", 2),
                ("API token (first half)", 2),
                ("Robot password", 3)
            ]
        );
        assert!(hits.iter().all(|h| h.source.ends_with("leak.log")));
        // Half a token is still a hit.
        assert_eq!(scan_text(&API_TOKEN[..40], "x").len(), 1);
        assert!(scan_text(ROBOT_USER, "x").is_empty());
    }
}
