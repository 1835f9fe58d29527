//! The [`Checker`]: reads the settings of [`Args`], collecting problems and warnings, and the
//! parsers the settings are declared with.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::setting::Setting;
use super::{Args, FlagKind, Problem, Secret, parse_go_bool, parse_go_duration};

/// Collects problems and warnings while the settings of [`Args`] are read.
#[derive(Debug)]
pub(super) struct Checker<'a> {
    args: &'a Args,
    pub(super) problems: Vec<Problem>,
    pub(super) warnings: Vec<String>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(args: &'a Args) -> Self {
        Checker {
            args,
            problems: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub(super) fn problem(&mut self, setting: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            setting: setting.to_owned(),
            message: message.into(),
        });
    }

    pub(super) fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// The value of `setting` as written: given, or its default when not given. An
    /// environment-backed setting that is empty counts as not given.
    pub(super) fn raw(&self, setting: &Setting<impl Sized>) -> Option<&'a str> {
        let spec = &setting.spec;
        let given = self
            .args
            .value(spec.flag)
            .filter(|v| spec.env.is_none() || !v.is_empty());
        given.or(spec.default)
    }

    /// `setting`, parsed; a problem naming it (and the type's default) when it does not
    /// parse. Not given and without default it parses the empty string.
    pub(super) fn value<T: Default>(&mut self, setting: &Setting<T>) -> T {
        let raw = self.raw(setting).unwrap_or_default();
        self.parse(setting, raw).unwrap_or_default()
    }

    /// `setting`, parsed, when given (and not empty) or defaulted; a problem naming it when it
    /// does not parse.
    pub(super) fn optional<T>(&mut self, setting: &Setting<T>) -> Option<T> {
        let raw = self.raw(setting).filter(|v| !v.is_empty())?;
        self.parse(setting, raw)
    }

    fn parse<T>(&mut self, setting: &Setting<T>, raw: &str) -> Option<T> {
        (setting.parse)(raw)
            .map_err(|message| self.problem(&setting.spec.name(), message))
            .ok()
    }

    /// A flag accepted without effect, checked like upstream's: its name for problems.
    pub(super) fn check_kind(&mut self, flag: &str, kind: FlagKind, value: &str) -> bool {
        let checked = match kind {
            FlagKind::Bool => boolean(value).map(drop),
            FlagKind::Duration => duration(value).map(drop),
            FlagKind::Int => at_least(value, i64::MIN).map(drop),
            FlagKind::Text => Ok(()),
        };
        match checked {
            Ok(()) => true,
            Err(message) => {
                self.problem(flag, message);
                // As before: only a malformed duration withholds the "no effect" line.
                kind != FlagKind::Duration
            }
        }
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

/// A Go boolean (`true`, `1`, `t`, …).
pub(super) fn boolean(value: &str) -> Result<bool, String> {
    parse_go_bool(value)
        .ok_or_else(|| format!("invalid boolean {value:?} (expected true or false, 1 or 0)"))
}

/// A Go duration.
pub(super) fn duration(value: &str) -> Result<Duration, String> {
    parse_go_duration(value).map_err(|e| e.to_string())
}

/// A Go duration greater than zero.
pub(super) fn positive_duration(value: &str) -> Result<Duration, String> {
    match duration(value)? {
        d if d.is_zero() => Err("must be greater than zero".to_owned()),
        d => Ok(d),
    }
}

/// A number of at least `min`.
pub(super) fn at_least<T>(value: &str, min: T) -> Result<T, String>
where
    T: FromStr + PartialOrd + fmt::Display,
{
    match value.parse::<T>() {
        Ok(n) if n < min => Err(format!("must be at least {min}, got {n}")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{value:?} is not a valid number")),
    }
}

/// A value of a [`FromStr`] type whose error is the message.
pub(super) fn parsed<T: FromStr<Err = String>>(value: &str) -> Result<T, String> {
    value.parse()
}

/// Any text.
pub(super) fn requests_per_hour(value: &str) -> Result<u32, String> {
    value
        .trim()
        .parse::<u32>()
        .map_err(|err| format!("{value:?} is not a number of requests per hour ({err})"))
}

pub(super) fn text(value: &str) -> Result<String, String> {
    Ok(value.to_owned())
}

/// A path.
pub(super) fn path(value: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(value))
}

/// Any text but the empty one.
pub(super) fn non_empty_text(value: &str) -> Result<String, String> {
    if value.is_empty() {
        Err("must not be empty".to_owned())
    } else {
        Ok(value.to_owned())
    }
}

/// An http(s) URL with a host.
pub(super) fn url(value: &str) -> Result<String, String> {
    match value.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {
            Ok(value.to_owned())
        }
        _ => Err(format!("{value:?} is not an http(s) URL")),
    }
}

/// The file a secret comes from: `file` when the variable itself (`direct`) is unset or empty
/// and `file` is given (as [`Checker::secret_with_file`] decides). Only such a secret can be
/// read again while the process runs; one from the environment needs a restart.
pub(super) fn file_in_use(direct: Option<&Secret>, file: Option<&Path>) -> Option<PathBuf> {
    let direct = direct.filter(|s| !s.is_empty());
    let file = file.filter(|f| !f.as_os_str().is_empty());
    match (direct, file) {
        (None, Some(file)) => Some(file.to_path_buf()),
        _ => None,
    }
}
