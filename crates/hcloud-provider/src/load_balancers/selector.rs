//! Kubernetes label selectors in their string form (as `kubectl -l` and the `node-selector`
//! annotation take them), evaluated against Node labels.
//!
//! Grammar: requirements separated by `,` (AND), each one of `k`, `!k`, `k=v`, `k==v`, `k!=v`,
//! `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n` (as Kubernetes' `labels.Parse`: the label must
//! be an integer greater or less than `n`). An empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Exists(k) => labels.contains_key(k),
            Self::NotExists(k) => !labels.contains_key(k),
            Self::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            // As in Kubernetes: a missing key satisfies `!=` and `notin`.
            Self::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            // A label that is not an integer satisfies neither.
            Self::GreaterThan(k, n) => integer_label(labels, k).is_some_and(|v| v > *n),
            Self::LessThan(k, n) => integer_label(labels, k).is_some_and(|v| v < *n),
        }
    }
}

fn integer_label(labels: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    labels.get(key)?.parse().ok()
}

/// A parsed label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSelector {
    source: String,
    requirements: Vec<Requirement>,
}

impl fmt::Display for NodeSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

pub(super) fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = valid_name(name);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
    });
    name_ok && prefix_ok
}

pub(super) fn valid_value(value: &str) -> bool {
    value.is_empty() || valid_name(value)
}

/// Kubernetes' name rule, shared by label keys (after the prefix), label values, qualified
/// names such as a `loadBalancerClass`: 1 to 63 letters, digits, `-`, `_` or `.`, starting and
/// ending with a letter or digit.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Split at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    // The simulator's label-selector parser splits the same way: it is the API's independent
    // model and shares no code with the client side.
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| "unbalanced parentheses".to_owned())?;
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".to_owned());
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn set_operator(part: &str) -> Option<(&str, bool, &str)> {
    // `key in (…)` / `key notin (…)`; the key has no spaces.
    let (key, rest) = part.split_once(char::is_whitespace)?;
    let rest = rest.trim_start();
    if let Some(values) = rest.strip_prefix("notin") {
        return Some((key, false, values));
    }
    rest.strip_prefix("in").map(|values| (key, true, values))
}

/// `s` trimmed, when `valid` accepts it; else an error naming the label `what` (key or value).
fn checked(s: &str, valid: fn(&str) -> bool, what: &str) -> Result<String, String> {
    let s = s.trim();
    if valid(s) {
        Ok(s.to_owned())
    } else {
        Err(format!("invalid label {what} {s:?}"))
    }
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    if part.is_empty() {
        return Err("empty requirement".to_owned());
    }
    let key_checked = |key: &str| checked(key, valid_key, "key");
    let value_checked = |value: &str| checked(value, valid_value, "value");
    if let Some((key, positive, values)) = set_operator(part) {
        let values = values.trim();
        let inner = values
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| format!("expected a parenthesised value list in {part:?}"))?;
        let values = inner
            .split(',')
            .map(value_checked)
            .collect::<Result<Vec<_>, _>>()?;
        let key = key_checked(key)?;
        return Ok(if positive {
            Requirement::In(key, values)
        } else {
            Requirement::NotIn(key, values)
        });
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(Requirement::NotIn(
            key_checked(key)?,
            vec![value_checked(value)?],
        ));
    }
    for (operator, greater) in [('>', true), ('<', false)] {
        if let Some((key, value)) = part.split_once(operator) {
            let n = value
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("{part:?}: {operator} needs an integer, not {value:?}"))?;
            let key = key_checked(key)?;
            return Ok(if greater {
                Requirement::GreaterThan(key, n)
            } else {
                Requirement::LessThan(key, n)
            });
        }
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::In(
            key_checked(key)?,
            vec![value_checked(value)?],
        ));
    }
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(key_checked(key)?));
    }
    Ok(Requirement::Exists(key_checked(part)?))
}

impl NodeSelector {
    /// Parse a selector; the error says what is wrong.
    pub fn parse(source: &str) -> Result<Self, String> {
        let trimmed = source.trim();
        let requirements = if trimmed.is_empty() {
            Vec::new()
        } else {
            split_top_level(trimmed)?
                .into_iter()
                .map(parse_requirement)
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(Self {
            source: trimmed.to_owned(),
            requirements,
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::labels;

    #[test]
    fn matches_every_operator() {
        let node = labels(&[
            ("role", "worker"),
            ("zone", "fsn1"),
            ("example.com/gpu", ""),
            ("cores", "8"),
        ]);
        let cases = [
            ("", true),
            ("role=worker", true),
            ("role==worker", true),
            ("role=master", false),
            ("role!=master", true),
            ("missing!=x", true),
            ("role", true),
            ("!role", false),
            ("!missing", true),
            ("example.com/gpu", true),
            ("zone in (fsn1, nbg1)", true),
            ("zone in (hel1)", false),
            ("zone notin (hel1)", true),
            ("missing notin (a)", true),
            ("role=worker,zone in (nbg1,fsn1),!missing", true),
            ("role=worker,zone=hel1", false),
            ("cores>4", true),
            ("cores>8", false),
            ("cores<16", true),
            ("cores<8", false),
            ("zone>1", false),
            ("missing<5", false),
            ("role=worker,cores>2", true),
        ];
        for (selector, expected) in cases {
            let parsed = NodeSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&node), expected, "{selector}");
        }
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in [
            "=x",
            "role=a b",
            "zone in fsn1",
            "zone in (a",
            "a,,b",
            "-bad",
            "cores>four",
            "cores<",
        ] {
            assert!(NodeSelector::parse(bad).is_err(), "{bad}");
        }
        // An empty value is allowed, as in Kubernetes.
        assert!(NodeSelector::parse("role=").is_ok());
    }
}
