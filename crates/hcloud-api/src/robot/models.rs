//! Lenient models of the Robot answers this client reads.

use serde::Deserialize;

use crate::macros::string_enum;
use crate::models::common::null_default;

/// A dedicated server as `GET /server` and `GET /server/{number}` describe it (the element
/// inside `{"server": {...}}`). Only the fields a CCM reads are kept; `null` reads as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RobotServer {
    /// The server number, Robot's ID (`hrobot://<number>` as a providerID).
    pub server_number: u64,
    /// The name set in Robot; a Node of the same name is this server.
    #[serde(default, deserialize_with = "null_default")]
    pub server_name: String,
    /// The primary IPv4 address (empty when the server has none).
    #[serde(default, deserialize_with = "null_default")]
    pub server_ip: String,
    /// The IPv6 network, e.g. `2a01:4f8:111:4221::` (empty when none).
    #[serde(default, deserialize_with = "null_default")]
    pub server_ipv6_net: String,
    /// The product, e.g. `EX44` or `Server Auction`.
    #[serde(default, deserialize_with = "null_default")]
    pub product: String,
    /// The data centre, e.g. `FSN1-DC14`.
    #[serde(default, deserialize_with = "null_default")]
    pub dc: String,
}

/// The reset state of a server (`GET /reset/{number}`, the element inside `{"reset": {...}}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RobotReset {
    /// `running`, `shut off`, `shut down`, `not supported`, …; only `shut off` means powered off.
    #[serde(default, deserialize_with = "null_default")]
    pub operating_status: String,
}

impl RobotReset {
    /// True only for `shut off`, the one state in which the server is powered off.
    pub fn is_shut_off(&self) -> bool {
        self.operating_status == "shut off"
    }
}

string_enum! {
    /// The `code` of a Robot error answer.
    pub enum RobotErrorCode {
        Unauthorized = "UNAUTHORIZED",
        ServerNotFound = "SERVER_NOT_FOUND",
        RateLimitExceeded = "RATE_LIMIT_EXCEEDED",
        ResetNotAvailable = "RESET_NOT_AVAILABLE",
        NotFound = "NOT_FOUND",
        InternalError = "INTERNAL_ERROR",
    }
}

/// `{"error": {"status", "code", "message", ...}}`; the status inside is ignored (the HTTP
/// status is the one kept), as are extras such as `max_request` and `interval`.
#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(default, deserialize_with = "null_default")]
    code: String,
    #[serde(default, deserialize_with = "null_default")]
    message: String,
}

/// An error answer of the Robot webservice plus the request it answered. Its text never
/// holds the credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Robot {method} {path}: {status} {code}: {message}")]
pub struct RobotApiError {
    /// HTTP status.
    pub status: u16,
    /// Error code (`Unknown("")` when the answer had no error envelope, e.g. a proxy's page).
    pub code: RobotErrorCode,
    /// Human readable message.
    pub message: String,
    /// HTTP method of the request.
    pub method: String,
    /// Path of the request, relative to the base URL.
    pub path: String,
}

impl RobotApiError {
    /// Builds the error from an answer's status and body. A body that is not Robot's error
    /// envelope (a proxy's page, an empty body) keeps the status, with code `Unknown("")`
    /// and the start of the body as message.
    pub(crate) fn from_response(status: u16, body: &[u8], method: &str, path: &str) -> Self {
        let (code, message) = match serde_json::from_slice::<Envelope>(body) {
            Ok(envelope) => (envelope.error.code, envelope.error.message),
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                (String::new(), text.trim().chars().take(200).collect())
            }
        };
        RobotApiError {
            status,
            code: RobotErrorCode::from(code),
            message,
            method: method.to_owned(),
            path: path.to_owned(),
        }
    }

    /// True for `SERVER_NOT_FOUND` (and a bare `NOT_FOUND`): Robot says the server is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.code,
            RobotErrorCode::ServerNotFound | RobotErrorCode::NotFound
        )
    }

    /// True for `RATE_LIMIT_EXCEEDED`, and for a 403 without an envelope (what the official
    /// client treats as the rate limit too).
    pub fn is_rate_limited(&self) -> bool {
        self.code == RobotErrorCode::RateLimitExceeded
            || (self.status == 403 && self.code.as_str().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_decodes_leniently() {
        let json = r#"{"server": {"server_ip": null, "server_ipv6_net": "2a01:4f8:111:4221::",
            "server_number": 321, "server_name": "worker-1", "product": "EX44", "dc": "FSN1-DC14",
            "traffic": "unlimited", "status": "ready", "cancelled": false, "subnet": null}}"#;
        #[derive(Deserialize)]
        struct Wrapped {
            server: RobotServer,
        }
        let server = serde_json::from_str::<Wrapped>(json).map(|w| w.server);
        assert_eq!(
            server.ok(),
            Some(RobotServer {
                server_number: 321,
                server_name: "worker-1".into(),
                server_ip: String::new(),
                server_ipv6_net: "2a01:4f8:111:4221::".into(),
                product: "EX44".into(),
                dc: "FSN1-DC14".into(),
            })
        );
    }

    #[test]
    fn only_shut_off_is_powered_off() {
        let reset = |s: &str| RobotReset {
            operating_status: s.into(),
        };
        assert!(reset("shut off").is_shut_off());
        for other in ["running", "shut down", "not supported", ""] {
            assert!(!reset(other).is_shut_off(), "{other}");
        }
    }

    #[test]
    fn error_answers_decode_with_and_without_envelope() {
        let body = br#"{"error":{"status":403,"code":"RATE_LIMIT_EXCEEDED","max_request":200,"interval":3600,"message":"rate limit exceeded"}}"#;
        let e = RobotApiError::from_response(403, body, "GET", "/server");
        assert_eq!(e.code, RobotErrorCode::RateLimitExceeded);
        assert_eq!(e.message, "rate limit exceeded");
        assert!(e.is_rate_limited());
        assert_eq!(
            e.to_string(),
            "Robot GET /server: 403 RATE_LIMIT_EXCEEDED: rate limit exceeded"
        );
        let bare = RobotApiError::from_response(502, b"<html>Bad Gateway</html>", "GET", "/x");
        assert_eq!(bare.status, 502);
        assert_eq!(bare.code.as_str(), "");
        assert!(bare.message.contains("Bad Gateway"));
    }

    #[test]
    fn error_classes() {
        let err = |status: u16, code: &str| RobotApiError {
            status,
            code: code.into(),
            message: String::new(),
            method: "GET".into(),
            path: "/server".into(),
        };
        assert!(err(404, "SERVER_NOT_FOUND").is_not_found());
        assert!(!err(401, "UNAUTHORIZED").is_not_found());
        assert!(!err(500, "INTERNAL_ERROR").is_not_found());
        assert!(err(403, "RATE_LIMIT_EXCEEDED").is_rate_limited());
        assert!(err(403, "").is_rate_limited());
        assert!(!err(403, "UNAUTHORIZED").is_rate_limited());
        let wrapped = crate::Error::Robot(Box::new(err(403, "RATE_LIMIT_EXCEEDED")));
        assert_eq!(wrapped.kind(), "robot_rate_limited");
        assert!(!wrapped.may_have_acted());
        assert!(
            !wrapped.is_not_found(),
            "a Robot answer is never a Cloud not-found"
        );
    }
}
