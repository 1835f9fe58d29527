//! Fault injection: the next N requests matching a method and a path pattern get an error,
//! added latency, have the actions they start fail, or take effect while their answer is lost.
//!
//! Path patterns are matched against the request path below `/v1` (e.g. `/servers/42`):
//! `*` matches any run of characters (also `/`), `{name}` matches exactly one non-empty path
//! segment, anything else matches literally. Examples: `/servers*`, `/servers/{id}`,
//! `/load_balancers/{id}/actions/add_target`, `*`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One fault rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fault {
    /// HTTP method to match (any when `None`), case-insensitive.
    pub method: Option<String>,
    /// Path pattern below `/v1`.
    pub path: String,
    /// How many matching requests are affected (0 is treated as 1).
    pub count: u32,
    /// HTTP status to answer with (derived from `code` when unset).
    pub status: Option<u16>,
    /// Error code to answer with (derived from `status` when unset).
    pub code: Option<String>,
    /// Latency added before answering.
    #[serde(with = "opt_millis", rename = "latency_ms")]
    pub latency: Option<Duration>,
    /// Let the request through but make the actions it starts end in `error`.
    pub fail_action: bool,
    /// Let the request through (it takes effect), then lose its answer: the client gets a
    /// proxy's `502 Bad Gateway` HTML page instead.
    pub lose_reply: bool,
    /// The request never reaches the API: a proxy in between answers with this status and an
    /// HTML page (no error envelope, no error code).
    pub proxy_status: Option<u16>,
}

impl Fault {
    /// A fault for requests whose path matches `path`.
    pub fn new(path: impl Into<String>) -> Fault {
        Fault {
            path: path.into(),
            count: 1,
            ..Fault::default()
        }
    }
    setters! {
        /// Only this HTTP method.
        method(Some into String);
        /// Number of affected requests.
        count(u32);
        /// Answer with this HTTP status.
        status(Some u16);
        /// Answer with this error code.
        code(Some into String);
        /// Add latency.
        latency(Some Duration);
    }
    /// Make the started actions fail (with `code` as the action error code if set).
    pub fn fail_action(mut self) -> Fault {
        self.fail_action = true;
        self
    }

    /// Answer as a proxy in front of the API would: `status` with an HTML page.
    pub fn proxy_status(mut self, status: u16) -> Fault {
        self.proxy_status = Some(status);
        self
    }

    /// Carry the request out but answer with a proxy's 502 page.
    pub fn lose_reply(mut self) -> Fault {
        self.lose_reply = true;
        self
    }

    /// Whether this rule applies to a request.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && pattern_matches(&self.path, path)
    }
}

/// Glob match: `*` any characters, `{x}` one segment.
pub fn pattern_matches(pattern: &str, path: &str) -> bool {
    let p = pattern.as_bytes();
    let s = path.as_bytes();
    matches_at(p, s)
}

fn matches_at(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| matches_at(&p[1..], &s[i..])),
        Some(b'{') => {
            let Some(close) = p.iter().position(|&c| c == b'}') else {
                return s.first() == Some(&b'{') && matches_at(&p[1..], &s[1..]);
            };
            let seg_len = s.iter().position(|&c| c == b'/').unwrap_or(s.len());
            seg_len > 0 && matches_at(&p[close + 1..], &s[seg_len..])
        }
        Some(&c) => s.first() == Some(&c) && matches_at(&p[1..], &s[1..]),
    }
}

/// What a matching rule asks the request pipeline to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultHit {
    /// Sleep this long first.
    pub latency: Option<Duration>,
    /// Answer with this error instead of handling the request.
    pub respond: Option<(u16, String)>,
    /// Fail the actions the request starts, with this code.
    pub fail_action: Option<String>,
    /// Carry the request out, then answer with a proxy's 502 page instead of its answer.
    pub lose_reply: bool,
    /// Answer with a proxy's HTML page of this status instead of handling the request.
    pub proxy_status: Option<u16>,
}

/// The active fault rules.
#[derive(Debug, Default)]
pub struct FaultSet {
    rules: Vec<Fault>,
}

impl FaultSet {
    /// Adds a rule.
    pub fn add(&mut self, mut fault: Fault) {
        if fault.count == 0 {
            fault.count = 1;
        }
        self.rules.push(fault);
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// The rules still active.
    pub fn rules(&self) -> &[Fault] {
        &self.rules
    }

    /// Consumes the first matching rule.
    pub fn take(&mut self, method: &str, path: &str) -> Option<FaultHit> {
        self.take_with(
            method,
            path,
            crate::error::code_for_status,
            crate::error::status_for_code,
        )
    }

    /// Consumes the first matching rule, deriving a missing code or status with the given
    /// tables (the Robot webservice has its own codes).
    pub fn take_with(
        &mut self,
        method: &str,
        path: &str,
        code_for_status: fn(u16) -> &'static str,
        status_for_code: fn(&str) -> u16,
    ) -> Option<FaultHit> {
        let idx = self.rules.iter().position(|f| f.matches(method, path))?;
        let rule = self.rules.get_mut(idx)?;
        rule.count = rule.count.saturating_sub(1);
        let rule = rule.clone();
        if rule.count == 0 {
            self.rules.remove(idx);
        }
        let respond = if rule.fail_action || rule.lose_reply || rule.proxy_status.is_some() {
            None
        } else {
            match (rule.status, rule.code.clone()) {
                (None, None) => None,
                (Some(s), None) => Some((s, code_for_status(s).to_string())),
                (None, Some(c)) => Some((status_for_code(&c), c)),
                (Some(s), Some(c)) => Some((s, c)),
            }
        };
        let fail_action = rule.fail_action.then(|| {
            rule.code
                .clone()
                .unwrap_or_else(|| "action_failed".to_string())
        });
        Some(FaultHit {
            latency: rule.latency,
            respond,
            fail_action,
            lose_reply: rule.lose_reply,
            proxy_status: rule.proxy_status,
        })
    }
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(pattern_matches("/servers*", "/servers"));
        assert!(pattern_matches("/servers*", "/servers/1/actions/poweron"));
        assert!(pattern_matches("/servers/{id}", "/servers/42"));
        assert!(!pattern_matches("/servers/{id}", "/servers/42/actions"));
        assert!(!pattern_matches("/servers/{id}", "/servers/"));
        assert!(pattern_matches(
            "/load_balancers/{id}/actions/*",
            "/load_balancers/3/actions/add_target"
        ));
        assert!(pattern_matches("*", "/anything"));
        assert!(!pattern_matches("/servers", "/servers/1"));
    }

    #[test]
    fn counts_down_and_derives_codes() {
        let mut set = FaultSet::default();
        set.add(Fault::new("/servers").method("GET").count(2).status(503));
        assert_eq!(set.take("POST", "/servers"), None);
        let hit = set.take("get", "/servers").unwrap();
        assert_eq!(hit.respond, Some((503, "unavailable".to_string())));
        assert!(set.take("GET", "/servers").is_some());
        assert_eq!(set.take("GET", "/servers"), None);
        set.add(Fault::new("/x").code("locked"));
        assert_eq!(
            set.take("GET", "/x").unwrap().respond,
            Some((423, "locked".to_string()))
        );
        set.add(Fault::new("/y").fail_action());
        let hit = set.take("POST", "/y").unwrap();
        assert_eq!(hit.respond, None);
        assert_eq!(hit.fail_action.as_deref(), Some("action_failed"));
    }
}
