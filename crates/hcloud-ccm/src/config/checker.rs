//! The [`Checker`]: collects problems and warnings while settings are parsed, and the small
//! parsing helpers every area uses.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use super::{Problem, Secret, parse_go_bool, parse_go_duration};

/// Collects problems and warnings while settings are parsed.
#[derive(Debug, Default)]
pub(super) struct Checker {
    pub(super) problems: Vec<Problem>,
    pub(super) warnings: Vec<String>,
}

impl Checker {
    pub(super) fn problem(&mut self, setting: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            setting: setting.to_owned(),
            message: message.into(),
        });
    }

    pub(super) fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    pub(super) fn bool(&mut self, setting: &str, value: &str) -> bool {
        parse_go_bool(value).unwrap_or_else(|| {
            self.problem(
                setting,
                format!("invalid boolean {value:?} (expected true or false, 1 or 0)"),
            );
            false
        })
    }

    /// An environment-backed boolean: empty means the default.
    pub(super) fn env_bool(&mut self, setting: &str, value: &str, default: &str) -> bool {
        self.bool(setting, or_default(value, default))
    }

    /// An environment-backed value of a [`FromStr`] type: empty means the default.
    pub(super) fn env_parsed<T: FromStr<Err = String> + Default>(
        &mut self,
        setting: &str,
        value: &str,
        default: &str,
    ) -> T {
        self.parsed(setting, or_default(value, default))
    }

    /// An environment-backed Go duration: empty means the default.
    pub(super) fn env_duration(&mut self, setting: &str, value: &str, default: &str) -> Duration {
        self.duration(setting, or_default(value, default))
    }

    pub(super) fn opt_bool(&mut self, setting: &str, value: Option<&str>) -> Option<bool> {
        non_empty(value).map(|v| self.bool(setting, v))
    }

    pub(super) fn duration(&mut self, setting: &str, value: &str) -> Duration {
        parse_go_duration(value).unwrap_or_else(|e| {
            self.problem(setting, e.to_string());
            Duration::ZERO
        })
    }

    pub(super) fn positive_duration(&mut self, setting: &str, value: &str) -> Duration {
        match parse_go_duration(value) {
            Ok(d) if d.is_zero() => {
                self.problem(setting, "must be greater than zero");
                d
            }
            Ok(d) => d,
            Err(e) => {
                self.problem(setting, e.to_string());
                Duration::ZERO
            }
        }
    }

    pub(super) fn number<T>(&mut self, setting: &str, value: &str, min: T) -> T
    where
        T: FromStr + Default + PartialOrd + fmt::Display + Copy,
    {
        match value.parse::<T>() {
            Ok(n) if n < min => {
                self.problem(setting, format!("must be at least {min}, got {n}"));
                n
            }
            Ok(n) => n,
            Err(_) => {
                self.problem(setting, format!("{value:?} is not a valid number"));
                T::default()
            }
        }
    }

    pub(super) fn parsed<T: FromStr<Err = String> + Default>(
        &mut self,
        setting: &str,
        value: &str,
    ) -> T {
        value.parse().unwrap_or_else(|e| {
            self.problem(setting, e);
            T::default()
        })
    }

    /// A secret from `VAR` or, when that is unset or empty, the file named by `VAR_FILE`.
    pub(super) fn secret_with_file(
        &mut self,
        setting: &str,
        direct: Option<&Secret>,
        file: Option<&Path>,
    ) -> Option<Secret> {
        let direct = direct.filter(|s| !s.is_empty());
        let file = file.filter(|f| !f.as_os_str().is_empty());
        let file_setting = format!("{setting}_FILE");
        if let (Some(_), Some(_)) = (direct, file) {
            self.warn(format!(
                "both {setting} and {file_setting} are set; using {setting}"
            ));
        }
        if let Some(secret) = direct {
            return Some(secret.clone());
        }
        let path = file?;
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let value = text.trim();
                if value.is_empty() {
                    self.problem(&file_setting, format!("file {} is empty", path.display()));
                    None
                } else {
                    Some(Secret::new(value))
                }
            }
            Err(e) => {
                self.problem(
                    &file_setting,
                    format!("cannot read {}: {e}", path.display()),
                );
                None
            }
        }
    }
}

pub(super) fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

pub(super) fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// Checks that `value` is an http(s) URL with a host.
pub(super) fn check_url(c: &mut Checker, setting: &str, value: &str) {
    match value.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {}
        _ => c.problem(setting, format!("{value:?} is not an http(s) URL")),
    }
}
