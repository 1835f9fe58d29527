//! Errors of the client.
//!
//! The API's own errors ([`ApiError`]) are kept apart from transport failures, undecodable
//! answers, bad configuration and failed actions. Nothing here ever contains the token.

use std::fmt;

use serde::Deserialize;

use crate::macros::string_enum;

string_enum! {
    /// The machine readable `code` of an API error. Clients branch on this, not on the status.
    pub enum ErrorCode {
        JsonError = "json_error",
        Unauthorized = "unauthorized",
        TokenReadonly = "token_readonly",
        Forbidden = "forbidden",
        Maintenance = "maintenance",
        ResourceLimitExceeded = "resource_limit_exceeded",
        NotFound = "not_found",
        MethodNotAllowed = "method_not_allowed",
        UniquenessError = "uniqueness_error",
        Conflict = "conflict",
        DeprecatedApiEndpoint = "deprecated_api_endpoint",
        ResourceUnavailable = "resource_unavailable",
        InvalidInput = "invalid_input",
        ServiceError = "service_error",
        UnsupportedError = "unsupported_error",
        Locked = "locked",
        Protected = "protected",
        RateLimitExceeded = "rate_limit_exceeded",
        ServerError = "server_error",
        BadGateway = "bad_gateway",
        Unavailable = "unavailable",
        Timeout = "timeout",
        ActionFailed = "action_failed",
        SourcePortAlreadyUsed = "source_port_already_used",
        TargetAlreadyDefined = "target_already_defined",
        ServerNotAttachedToNetwork = "server_not_attached_to_network",
        LoadBalancerNotAttachedToNetwork = "load_balancer_not_attached_to_network",
        LoadBalancerAlreadyAttached = "load_balancer_already_attached",
        IpNotAvailable = "ip_not_available",
        NoSubnetAvailable = "no_subnet_available",
        TargetsWithoutUsePrivateIp = "targets_without_use_private_ip",
        InvalidLoadBalancerType = "invalid_load_balancer_type",
        CloudResourceIpNotAllowed = "cloud_resource_ip_not_allowed",
        NetworksOverlap = "networks_overlap",
        MissingIpv4 = "missing_ipv4",
    }
}

/// The error type of every operation of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API answered with an error (boxed: it is the largest variant).
    #[error(transparent)]
    Api(Box<ApiError>),
    /// The request did not get an answer (connect failure, timeout, broken body).
    #[error(transparent)]
    Transport(TransportError),
    /// The API answered with something this client could not decode.
    #[error(transparent)]
    Decode(DecodeError),
    /// The client configuration is invalid.
    #[error(transparent)]
    Config(ConfigError),
    /// An action the client waited for finished with status `error`.
    #[error(transparent)]
    Action(ActionError),
    /// The Robot webservice answered with an error (boxed like [`Error::Api`]).
    #[error(transparent)]
    Robot(Box<crate::robot::RobotApiError>),
}

impl Error {
    /// True only for a 404 answer with code `not_found`: the resource does not exist.
    /// Timeouts, server errors, rate limiting and authentication failures are never
    /// "not found".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(e) if e.status == 404 && e.code == ErrorCode::NotFound)
    }

    /// The API error code, if this is an API error.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Error::Api(e) => Some(&e.code),
            _ => None,
        }
    }

    /// The Robot error, if the Robot webservice answered with one.
    pub fn robot(&self) -> Option<&crate::robot::RobotApiError> {
        match self {
            Error::Robot(e) => Some(e),
            _ => None,
        }
    }

    /// The HTTP status, if the API answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api(e) => Some(e.status),
            _ => None,
        }
    }

    /// True when the API reports the resource as locked by a running action (423 `locked`),
    /// or, for networks, a conflicting change (409 `conflict`). Callers may retry later.
    pub fn is_locked_or_conflict(&self) -> bool {
        matches!(
            self.code(),
            Some(ErrorCode::Locked) | Some(ErrorCode::Conflict)
        )
    }

    /// True for 429 `rate_limit_exceeded`.
    pub fn is_rate_limited(&self) -> bool {
        matches!(self.code(), Some(ErrorCode::RateLimitExceeded))
    }

    /// Whether a write that failed with this error may still have been carried out.
    ///
    /// Only the API's own refusal (a 4xx answer with an error code: invalid input, a taken
    /// name, a rate limit, a lock) says that nothing happened. A lost or broken answer, an
    /// answer that could not be decoded, a 5xx and a 4xx without the API's error envelope
    /// (a proxy in between) leave it open: the resource may exist now.
    pub fn may_have_acted(&self) -> bool {
        match self {
            Error::Api(e) => e.status >= 500 || e.code.as_str().is_empty(),
            Error::Robot(e) => e.status >= 500 || e.code.as_str().is_empty(),
            Error::Transport(_) | Error::Decode(_) | Error::Action(_) => true,
            Error::Config(_) => false,
        }
    }

    /// The error for an answer to `method path` (with `status`; 0 for a request body that
    /// could not be encoded) that `source` could not decode.
    pub(crate) fn decode(
        method: &str,
        path: &str,
        status: u16,
        source: serde_json::Error,
    ) -> Error {
        Error::Decode(DecodeError {
            method: method.to_owned(),
            path: path.to_owned(),
            status,
            source,
        })
    }

    /// A short, bounded label for metrics and events (e.g. `api_not_found`, `transport`).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Api(e) if e.code == ErrorCode::NotFound => "api_not_found",
            Error::Api(e) if e.code == ErrorCode::RateLimitExceeded => "api_rate_limited",
            Error::Api(e) if matches!(e.code, ErrorCode::Locked | ErrorCode::Conflict) => {
                "api_locked"
            }
            Error::Api(e) if e.status == 401 || e.status == 403 => "api_auth",
            Error::Api(e) if e.status >= 500 => "api_server",
            Error::Api(_) => "api",
            Error::Robot(e) if e.is_not_found() => "robot_not_found",
            Error::Robot(e) if e.is_rate_limited() => "robot_rate_limited",
            Error::Robot(e) if e.status == 401 || e.status == 403 => "robot_auth",
            Error::Robot(e) if e.status >= 500 => "robot_server",
            Error::Robot(_) => "robot",
            Error::Transport(_) => "transport",
            Error::Decode(_) => "decode",
            Error::Config(_) => "config",
            Error::Action(_) => "action",
        }
    }
}

/// An error answer of the API: `{"error": {"code", "message", "details"}}` plus the status.
/// Its text ends with the invalid fields, when the API named any (as the official CCM adds
/// them since its v1.35): `…: invalid input in fields 'name', 'targets' (name: is taken)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {path}: {status} {code}: {message}{}", fields_text(&details.fields))]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Error code (`Unknown("")` when the answer had no error body, e.g. a bare 502).
    pub code: ErrorCode,
    /// Human readable message.
    pub message: String,
    /// Details (field errors for `invalid_input`, the raw JSON for anything else).
    pub details: ErrorDetails,
    /// HTTP method of the request.
    pub method: String,
    /// Path of the request, relative to the endpoint, without query.
    pub path: String,
}

/// Details of an API error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetails {
    /// Invalid fields (`details.fields`), empty if none.
    pub fields: Vec<FieldError>,
    /// The raw `details` value, if present and not null.
    pub raw: Option<serde_json::Value>,
}

/// ` (field: message; other: message)` for the invalid fields, empty without any.
fn fields_text(fields: &[FieldError]) -> String {
    if fields.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = fields
        .iter()
        .map(|f| match f.messages.as_slice() {
            [] => f.name.clone(),
            messages => format!("{}: {}", f.name, messages.join(", ")),
        })
        .collect();
    format!(" ({})", parts.join("; "))
}

/// One invalid field of an `invalid_input` (or `uniqueness_error`) answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FieldError {
    /// Field name.
    pub name: String,
    /// What is wrong with it.
    #[serde(default, deserialize_with = "crate::models::common::null_default")]
    pub messages: Vec<String>,
}

/// A request that got no (complete) answer.
#[derive(Debug, thiserror::Error)]
#[error("{method} {path}: {source}")]
pub struct TransportError {
    /// HTTP method of the request.
    pub method: String,
    /// Path of the request, relative to the endpoint, without query.
    pub path: String,
    /// The underlying error.
    #[source]
    pub source: reqwest::Error,
}

impl TransportError {
    /// True when the request timed out.
    pub fn is_timeout(&self) -> bool {
        self.source.is_timeout()
    }
}

/// An answer that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("{method} {path}: status {status}: undecodable answer: {source}")]
pub struct DecodeError {
    /// HTTP method of the request.
    pub method: String,
    /// Path of the request, relative to the endpoint, without query.
    pub path: String,
    /// HTTP status of the answer.
    pub status: u16,
    /// The decoding failure.
    #[source]
    pub source: serde_json::Error,
}

/// An action that finished with status `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("action {id} ({command}) failed: {code}: {message}")]
pub struct ActionError {
    /// ID of the action.
    pub id: i64,
    /// Command of the action.
    pub command: String,
    /// Error code reported by the action, e.g. `action_failed`.
    pub code: String,
    /// Error message reported by the action.
    pub message: String,
}

/// Invalid configuration. Messages name the environment variable concerned, never the token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The token is empty (after trimming whitespace).
    #[error("{variable}: the API token is empty")]
    EmptyToken {
        /// The variable the token came from.
        variable: &'static str,
    },
    /// The token contains characters not allowed in an HTTP header.
    #[error("{variable}: the API token contains invalid characters")]
    InvalidToken {
        /// The variable the token came from.
        variable: &'static str,
    },
    /// The endpoint is not an absolute http(s) URL.
    #[error("{variable}: invalid endpoint {value:?}: {reason}")]
    InvalidEndpoint {
        /// The variable (or setting) the endpoint came from.
        variable: &'static str,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A numeric or duration setting is out of range.
    #[error("invalid setting {setting}: {reason}")]
    InvalidSetting {
        /// Name of the setting.
        setting: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
}

impl From<ConfigError> for Error {
    fn from(value: ConfigError) -> Self {
        Error::Config(value)
    }
}

impl From<ApiError> for Error {
    fn from(value: ApiError) -> Self {
        Error::Api(Box::new(value))
    }
}

impl From<ActionError> for Error {
    fn from(value: ActionError) -> Self {
        Error::Action(value)
    }
}

#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(default, deserialize_with = "crate::models::common::null_default")]
    code: String,
    #[serde(default, deserialize_with = "crate::models::common::null_default")]
    message: String,
    #[serde(default)]
    details: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct FieldsDetails {
    #[serde(default, deserialize_with = "crate::models::common::null_default")]
    fields: Vec<FieldError>,
}

impl ApiError {
    /// Builds the error from an answer's status and body. A body that is not the API's
    /// error envelope (e.g. a proxy's bare 502) gives code `Unknown("")` and the start of
    /// the body as message.
    pub(crate) fn from_response(status: u16, body: &[u8], method: &str, path: &str) -> Self {
        match serde_json::from_slice::<Envelope>(body) {
            Ok(envelope) => {
                let raw = envelope.error.details.filter(|v| !v.is_null());
                let fields = raw
                    .as_ref()
                    .and_then(|v| serde_json::from_value::<FieldsDetails>(v.clone()).ok())
                    .map(|d| d.fields)
                    .unwrap_or_default();
                ApiError {
                    status,
                    code: ErrorCode::from(envelope.error.code),
                    message: envelope.error.message,
                    details: ErrorDetails { fields, raw },
                    method: method.to_owned(),
                    path: path.to_owned(),
                }
            }
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let message: String = text.trim().chars().take(200).collect();
                ApiError {
                    status,
                    code: ErrorCode::Unknown(String::new()),
                    message,
                    details: ErrorDetails::default(),
                    method: method.to_owned(),
                    path: path.to_owned(),
                }
            }
        }
    }

    /// True when the answer carried no API error envelope.
    pub fn is_bare(&self) -> bool {
        matches!(&self.code, ErrorCode::Unknown(c) if c.is_empty())
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.messages.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_invalid_input_details() {
        let body = br#"{"error":{"code":"invalid_input","message":"invalid input in field 'destination'","details":{"fields":[{"name":"destination","messages":["is invalid"]}]}}}"#;
        let e = ApiError::from_response(422, body, "POST", "/networks/1/actions/add_route");
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details.fields.len(), 1);
        assert_eq!(e.details.fields[0].name, "destination");
        assert_eq!(e.details.fields[0].messages, vec!["is invalid"]);
        assert!(e.details.raw.is_some());
        assert!(!e.is_bare());
        let shown = Error::from(e).to_string();
        assert_eq!(
            shown,
            "POST /networks/1/actions/add_route: 422 invalid_input: invalid input in field 'destination' (destination: is invalid)"
        );
    }

    #[test]
    fn bare_answers_have_empty_unknown_code() {
        let e = ApiError::from_response(502, b"<html>Bad Gateway</html>", "GET", "/servers");
        assert!(e.is_bare());
        assert_eq!(e.status, 502);
        assert!(e.message.contains("Bad Gateway"));
        let other_details = ApiError::from_response(
            403,
            br#"{"error":{"code":"resource_limit_exceeded","message":"limit","details":{"limits":[{"name":"load_balancer_targets"}]}}}"#,
            "POST",
            "/load_balancers/1/actions/add_target",
        );
        assert_eq!(other_details.code, ErrorCode::ResourceLimitExceeded);
        assert!(other_details.details.fields.is_empty());
        assert!(other_details.details.raw.is_some());
    }

    #[test]
    fn not_found_only_for_404_not_found() {
        let api = |status, code: &str| {
            Error::from(ApiError::from_response(
                status,
                format!(r#"{{"error":{{"code":"{code}","message":"m","details":null}}}}"#)
                    .as_bytes(),
                "GET",
                "/servers/1",
            ))
        };
        assert!(api(404, "not_found").is_not_found());
        assert_eq!(api(404, "not_found").kind(), "api_not_found");
        for (status, code) in [
            (404, "other"),
            (401, "unauthorized"),
            (429, "rate_limit_exceeded"),
            (500, "server_error"),
            (504, "timeout"),
            (423, "locked"),
        ] {
            assert!(!api(status, code).is_not_found(), "{status} {code}");
        }
        let bare_404 = Error::from(ApiError::from_response(404, b"nope", "GET", "/x"));
        assert!(!bare_404.is_not_found());
        assert!(api(423, "locked").is_locked_or_conflict());
        assert!(api(429, "rate_limit_exceeded").is_rate_limited());
        assert_eq!(
            api(401, "unauthorized").code(),
            Some(&ErrorCode::Unauthorized)
        );
        assert_eq!(api(401, "unauthorized").status(), Some(401));
        let config: Error = ConfigError::EmptyToken {
            variable: "HCLOUD_TOKEN",
        }
        .into();
        assert!(!config.is_not_found());
        assert_eq!(config.code(), None);
    }
}
