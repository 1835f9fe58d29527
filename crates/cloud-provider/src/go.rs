//! Values written the way Go reads them: booleans as `strconv.ParseBool` and durations as
//! `time.ParseDuration` ("30s", "5m", "1m30s", "200ms").
//!
//! Every Kubernetes component flag, label value and every setting of the official Hetzner CCM
//! uses this syntax, so manifests written for them keep working unchanged. These are the only
//! parsers of the workspace for both: the binary's flags and variables, the Service
//! annotations and the labels the controllers read all go through them.

use std::fmt;
use std::time::Duration;

/// Go's `strconv.ParseBool`: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing to parse.
    #[error("empty duration")]
    Empty,
    /// The text does not follow the `<number><unit>…` grammar.
    #[error("invalid duration {0:?} (expected e.g. \"30s\", \"5m\", \"1m30s\", \"200ms\")")]
    Invalid(String),
    /// A number without a unit (only "0" may stand alone).
    #[error("missing unit in duration {0:?} (valid units: ns, us, ms, s, m, h)")]
    MissingUnit(String),
    /// A unit that Go does not know.
    #[error("unknown unit {unit:?} in duration {text:?} (valid units: ns, us, ms, s, m, h)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        text: String,
    },
    /// Negative durations make no sense for any setting of this program.
    #[error("negative duration {0:?}")]
    Negative(String),
    /// More than Go's `time.Duration` (about 292 years) can hold.
    #[error("duration {0:?} is out of range")]
    Overflow(String),
}

/// The largest duration Go can represent (`math.MaxInt64` nanoseconds).
const MAX_NANOS: u128 = i64::MAX as u128;

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

/// Parses a Go duration string. A leading `+` is accepted; a leading `-` is rejected unless the
/// value is zero (Go accepts "-0s").
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let original = text;
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid(original.to_owned()));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        // Integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after_int) = rest.split_at(int_len);
        // Optional fraction.
        let (frac_digits, after_frac) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(DurationError::Invalid(original.to_owned()));
        }
        // Unit: everything up to the next digit or dot.
        let unit_len = after_frac
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after_frac.len(), |(i, _)| i);
        let (unit, after_unit) = after_frac.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(original.to_owned()));
        }
        let scale = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            text: original.to_owned(),
        })?;
        let overflow = || DurationError::Overflow(original.to_owned());
        let int_value: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| overflow())?
        };
        let mut component = int_value.checked_mul(scale).ok_or_else(overflow)?;
        if !frac_digits.is_empty() {
            // Go truncates fractional nanoseconds. 25 digits are far past a nanosecond of any
            // unit, and 10^25 times the largest unit (3.6e12 ns) stays within u128.
            let digits = &frac_digits[..frac_digits.len().min(25)];
            let frac_value: u128 = digits.parse().map_err(|_| overflow())?;
            let denominator = 10u128.pow(u32::try_from(digits.len()).map_err(|_| overflow())?);
            let frac_nanos = frac_value
                .checked_mul(scale)
                .map(|v| v / denominator)
                .ok_or_else(overflow)?;
            component = component.checked_add(frac_nanos).ok_or_else(overflow)?;
        }
        total = total.checked_add(component).ok_or_else(overflow)?;
        if total > MAX_NANOS {
            return Err(overflow());
        }
        rest = after_unit;
    }
    if negative && total != 0 {
        return Err(DurationError::Negative(original.to_owned()));
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| DurationError::Overflow(original.to_owned()))?;
    let nanos = u32::try_from(total % 1_000_000_000)
        .map_err(|_| DurationError::Overflow(original.to_owned()))?;
    Ok(Duration::new(secs, nanos))
}

/// Displays a [`Duration`] the way Go's `Duration.String()` does ("1m30s", "200ms", "0s").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d < Duration::from_secs(1) {
            let nanos = d.subsec_nanos();
            return if nanos.is_multiple_of(1_000_000) {
                write!(f, "{}ms", nanos / 1_000_000)
            } else if nanos.is_multiple_of(1_000) {
                write!(f, "{}us", nanos / 1_000)
            } else {
                write!(f, "{nanos}ns")
            };
        }
        let total_secs = d.as_secs();
        let hours = total_secs / 3600;
        let minutes = (total_secs % 3600) / 60;
        let secs = total_secs % 60;
        let nanos = d.subsec_nanos();
        if hours > 0 {
            write!(f, "{hours}h")?;
        }
        if hours > 0 || minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        if nanos == 0 {
            write!(f, "{secs}s")
        } else {
            let frac = format!("{nanos:09}");
            write!(f, "{secs}.{}s", frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_as_go_reads_them() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["", "yes", "no", "tRUE", " true", "2"] {
            assert_eq!(parse_bool(bad), None, "{bad:?}");
        }
    }

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap()
    }

    #[test]
    fn parses_go_forms() {
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("200ms"), Duration::from_millis(200));
        assert_eq!(ok("1h2m3s4ms5us6ns"), Duration::new(3723, 4_005_006));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("1.s"), Duration::from_secs(1));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("-0"), Duration::ZERO);
        assert_eq!(ok("+15s"), Duration::from_secs(15));
        assert_eq!(ok("3\u{b5}s"), Duration::from_micros(3));
        assert_eq!(ok("3\u{3bc}s"), Duration::from_micros(3));
        assert_eq!(ok("12h"), Duration::from_secs(43_200));
    }

    /// Found by fuzzing (`crates/hcloud-ccm/tests/it/fuzz.rs`): a fraction of 27 or more digits
    /// overflowed the intermediate product and was refused as "out of range"; Go drops the
    /// digits past its precision instead.
    #[test]
    fn long_fractions_are_truncated_not_out_of_range() {
        assert_eq!(
            ok(".100000000000000000000000000h"),
            Duration::from_secs(360)
        );
        assert_eq!(
            ok("1.000000000000000000000000000001s"),
            Duration::from_secs(1)
        );
        assert_eq!(
            ok("0.9999999999999999999999999999999999999m"),
            Duration::new(59, 999_999_999)
        );
    }

    #[test]
    fn rejects_what_go_rejects() {
        let unknown = |unit: &str, text: &str| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            text: text.to_owned(),
        };
        let cases = [
            ("", DurationError::Empty),
            ("30", DurationError::MissingUnit("30".to_owned())),
            ("15 s", unknown(" s", "15 s")),
            ("1d", unknown("d", "1d")),
            ("s", DurationError::Invalid("s".to_owned())),
            (".", DurationError::Invalid(".".to_owned())),
            ("-", DurationError::Invalid("-".to_owned())),
            ("-5s", DurationError::Negative("-5s".to_owned())),
            ("3000000h", DurationError::Overflow("3000000h".to_owned())),
            ("abc", DurationError::Invalid("abc".to_owned())),
        ];
        for (text, error) in cases {
            assert_eq!(parse_duration(text), Err(error), "{text:?}");
        }
    }

    #[test]
    fn displays_like_go() {
        assert_eq!(GoDuration(Duration::from_secs(90)).to_string(), "1m30s");
        assert_eq!(GoDuration(Duration::from_secs(300)).to_string(), "5m0s");
        assert_eq!(GoDuration(Duration::from_secs(15)).to_string(), "15s");
        assert_eq!(GoDuration(Duration::from_millis(200)).to_string(), "200ms");
        assert_eq!(GoDuration(Duration::from_millis(1500)).to_string(), "1.5s");
        assert_eq!(
            GoDuration(Duration::from_secs(43_200)).to_string(),
            "12h0m0s"
        );
        assert_eq!(GoDuration(Duration::ZERO).to_string(), "0s");
        for text in ["1m30s", "200ms", "12h0m0s", "1.5s", "15s"] {
            assert_eq!(GoDuration(ok(text)).to_string(), text);
        }
    }
}
