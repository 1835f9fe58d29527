//! Label selectors as the Hetzner Cloud API understands them.
//!
//! Grammar (comma means AND): `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`.
//! The controller crates parse the Kubernetes grammar, which is nearly the same; the simulator
//! keeps its own parser, as it is the independent model of the API and depends on none of them.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `k=v` or `k==v`.
    Equals(String, String),
    /// `k!=v` (also true when the key is absent).
    NotEquals(String, String),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
    /// `k in (a,b)`.
    In(String, Vec<String>),
    /// `k notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
}

/// A parsed selector: all requirements must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    /// The requirements, in source order.
    pub requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses a selector expression. An empty string selects everything.
    pub fn parse(input: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(input)? {
            let part = part.trim();
            if part.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err("empty requirement in label selector".to_string());
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Selector { requirements })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => {
                depth += 1;
                if depth > 1 {
                    return Err("nested parentheses in label selector".to_string());
                }
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced parentheses in label selector".to_string());
                }
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses in label selector".to_string());
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(rest) = part.strip_prefix('!') {
        let key = rest.trim();
        check_key(key)?;
        return Ok(Requirement::NotExists(key.to_string()));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key_of(k)?, value_of(v)?));
    }
    if let Some((k, v)) = part.split_once("==") {
        return Ok(Requirement::Equals(key_of(k)?, value_of(v)?));
    }
    if let Some((k, v)) = part.split_once('=') {
        return Ok(Requirement::Equals(key_of(k)?, value_of(v)?));
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let Some(list) = part[open + 1..].strip_suffix(')') else {
            return Err(format!("invalid set expression in label selector: {part}"));
        };
        let mut words = head.split_whitespace();
        let (Some(key), Some(op), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("invalid set expression in label selector: {part}"));
        };
        check_key(key)?;
        let values = list
            .split(',')
            .map(value_of)
            .collect::<Result<Vec<_>, _>>()?;
        if values.iter().all(String::is_empty) {
            return Err(format!("empty value set in label selector: {part}"));
        }
        return match op {
            "in" => Ok(Requirement::In(key.to_string(), values)),
            "notin" => Ok(Requirement::NotIn(key.to_string(), values)),
            other => Err(format!("unknown operator {other:?} in label selector")),
        };
    }
    let key = part.trim();
    check_key(key)?;
    Ok(Requirement::Exists(key.to_string()))
}

fn key_of(k: &str) -> Result<String, String> {
    let k = k.trim();
    check_key(k)?;
    Ok(k.to_string())
}

fn value_of(v: &str) -> Result<String, String> {
    let v = v.trim();
    if !is_label_value(v) {
        return Err(format!("invalid label value {v:?} in label selector"));
    }
    Ok(v.to_string())
}

fn check_key(k: &str) -> Result<(), String> {
    if is_label_key(k) {
        Ok(())
    } else {
        Err(format!("invalid label key {k:?} in label selector"))
    }
}

fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Whether `k` is a valid label key (`[prefix/]name`, prefix a DNS subdomain).
pub fn is_label_key(k: &str) -> bool {
    match k.rsplit_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|l| {
                    !l.is_empty()
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
                && is_name_part(name)
        }
        None => is_name_part(k),
    }
}

/// Whether `v` is a valid label value (may be empty).
pub fn is_label_value(v: &str) -> bool {
    v.is_empty() || is_name_part(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_operator() {
        let s = Selector::parse("a=1, b==2,c!=3,d,!e,f in (x, y),g notin (z)").unwrap();
        assert_eq!(
            s.requirements,
            vec![
                Requirement::Equals("a".into(), "1".into()),
                Requirement::Equals("b".into(), "2".into()),
                Requirement::NotEquals("c".into(), "3".into()),
                Requirement::Exists("d".into()),
                Requirement::NotExists("e".into()),
                Requirement::In("f".into(), vec!["x".into(), "y".into()]),
                Requirement::NotIn("g".into(), vec!["z".into()]),
            ]
        );
    }

    #[test]
    fn matches_semantics() {
        let l = labels(&[
            ("env", "prod"),
            ("tier", "web"),
            ("hcloud-ccm/service-uid", "abc"),
        ]);
        let ok = |s: &str| Selector::parse(s).unwrap().matches(&l);
        assert!(ok(""));
        assert!(ok("env=prod"));
        assert!(ok("env==prod,tier"));
        assert!(!ok("env=dev"));
        assert!(ok("env!=dev"));
        assert!(ok("missing!=x"));
        assert!(!ok("env!=prod"));
        assert!(ok("!missing"));
        assert!(!ok("!env"));
        assert!(ok("tier in (web,api)"));
        assert!(!ok("tier in (api)"));
        assert!(!ok("missing in (a)"));
        assert!(ok("tier notin (api)"));
        assert!(ok("missing notin (a)"));
        assert!(!ok("tier notin (web)"));
        assert!(ok("hcloud-ccm/service-uid=abc"));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "a=b=c",
            "=x",
            "a in (b",
            "a in b)",
            "a foo (b)",
            ",",
            "a,,b",
            "-a",
            "a in ()",
            "a b",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn label_key_rules() {
        assert!(is_label_key("example.com/my"));
        assert!(is_label_key("just-a-key"));
        assert!(!is_label_key("bad key"));
        assert!(!is_label_key("/x"));
        assert!(is_label_value(""));
        assert!(!is_label_value("-x"));
    }
}
