//! providerIDs as the official Hetzner CCM writes and reads them.

use std::fmt;

/// Scheme of cloud servers (`hcloud://<server id>`).
pub const CLOUD_SCHEME: &str = "hcloud://";
/// Scheme of Robot dedicated servers (`hrobot://<server number>`).
pub const ROBOT_SCHEME: &str = "hrobot://";
/// Legacy Robot form inside the cloud scheme (`hcloud://bm-<server number>`).
const LEGACY_ROBOT_PREFIX: &str = "bm-";

/// A parsed providerID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderId {
    /// A Hetzner Cloud server.
    Cloud(i64),
    /// A Hetzner Robot dedicated server.
    Robot(i64),
}

impl fmt::Display for ProviderId {
    /// The canonical form: `hcloud://ID` or `hrobot://N` (for the legacy `hcloud://bm-N`, see
    /// [`ProviderId::written`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cloud(id) => write!(f, "{CLOUD_SCHEME}{id}"),
            Self::Robot(number) => write!(f, "{ROBOT_SCHEME}{number}"),
        }
    }
}

/// Why a providerID could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "providerID {value:?} is not a Hetzner providerID ({reason}); expected hcloud://<server id>, hrobot://<server number> or hcloud://bm-<server number>"
)]
pub struct ParseProviderIdError {
    /// The rejected value.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl ProviderId {
    /// The form written to a Node that has no providerID: the canonical one, or with
    /// `legacy_robot` (`ROBOT_USE_LEGACY_PROVIDER_ID`) the legacy `hcloud://bm-N` for a Robot
    /// server, which Cluster API's Hetzner provider expects. A providerID a Node has is never
    /// rewritten, in either direction.
    pub fn written(self, legacy_robot: bool) -> String {
        match self {
            Self::Robot(number) if legacy_robot => {
                format!("{CLOUD_SCHEME}{LEGACY_ROBOT_PREFIX}{number}")
            }
            _ => self.to_string(),
        }
    }

    /// Parse a Node's `spec.providerID`.
    pub fn parse(value: &str) -> Result<ProviderId, ParseProviderIdError> {
        let error = |reason| ParseProviderIdError {
            value: value.to_owned(),
            reason,
        };
        let number = |digits: &str| -> Result<i64, ParseProviderIdError> {
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(error("the ID is not a positive number"));
            }
            match digits.parse::<i64>() {
                Ok(n) if n > 0 => Ok(n),
                Ok(_) => Err(error("the ID is not a positive number")),
                Err(_) => Err(error("the ID is out of range")),
            }
        };
        if let Some(rest) = value.strip_prefix(CLOUD_SCHEME) {
            match rest.strip_prefix(LEGACY_ROBOT_PREFIX) {
                Some(robot) => number(robot).map(ProviderId::Robot),
                None => number(rest).map(ProviderId::Cloud),
            }
        } else if let Some(rest) = value.strip_prefix(ROBOT_SCHEME) {
            number(rest).map(ProviderId::Robot)
        } else {
            Err(error("unknown scheme"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_the_official_ccm_reads() {
        let cases = [
            ("hcloud://123", Ok(ProviderId::Cloud(123))),
            ("hrobot://456", Ok(ProviderId::Robot(456))),
            ("hcloud://bm-789", Ok(ProviderId::Robot(789))),
            ("hcloud://", Err("the ID is not a positive number")),
            ("hcloud://bm-", Err("the ID is not a positive number")),
            ("hcloud://0", Err("the ID is not a positive number")),
            ("hcloud://-5", Err("the ID is not a positive number")),
            ("hcloud://12a", Err("the ID is not a positive number")),
            (
                "hcloud://99999999999999999999",
                Err("the ID is out of range"),
            ),
            ("aws:///eu-west-1a/i-123", Err("unknown scheme")),
            ("HCLOUD://1", Err("unknown scheme")),
            ("", Err("unknown scheme")),
        ];
        for (input, expected) in cases {
            let got = ProviderId::parse(input).map_err(|e| e.reason);
            assert_eq!(got, expected, "{input}");
        }
    }

    #[test]
    fn writes_the_canonical_form() {
        assert_eq!(ProviderId::Cloud(42).to_string(), "hcloud://42");
        assert_eq!(
            ProviderId::parse("hcloud://bm-7").map(|id| id.to_string()),
            Ok("hrobot://7".to_owned())
        );
    }

    #[test]
    fn the_legacy_robot_form_is_written_only_when_asked_for() {
        let cases = [
            (ProviderId::Robot(7), false, "hrobot://7"),
            (ProviderId::Robot(7), true, "hcloud://bm-7"),
            (ProviderId::Cloud(7), true, "hcloud://7"),
            (ProviderId::Cloud(7), false, "hcloud://7"),
        ];
        for (id, legacy, written) in cases {
            assert_eq!(id.written(legacy), written, "{id:?} legacy={legacy}");
            // What is written reads back as the same server.
            assert_eq!(ProviderId::parse(written), Ok(id));
        }
    }

    #[test]
    fn errors_name_the_value_and_the_accepted_forms() {
        let err = ProviderId::parse("gce://x").unwrap_err().to_string();
        assert!(err.contains("\"gce://x\""), "{err}");
        assert!(err.contains("hcloud://<server id>"), "{err}");
    }
}
