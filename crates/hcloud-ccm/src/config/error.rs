//! Configuration problems, each naming the flag or environment variable at fault.

use std::fmt;

/// One configuration problem, naming the flag or environment variable at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `--flag` or `ENV_VAR` (several joined by `/` when the problem involves them together).
    pub setting: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

/// Every problem found by [`Args::validate`](super::Args::validate).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in the order the settings are checked.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration ({} problem", self.problems.len())?;
        if self.problems.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str("):")?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// Whether some problem names `setting`.
    pub fn mentions(&self, setting: &str) -> bool {
        self.problems
            .iter()
            .any(|p| p.setting.split('/').any(|s| s == setting))
    }
}
