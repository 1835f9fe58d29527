//! Errors: the API error envelope the simulator answers with, and the crate's own error type.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Errors of the library (starting the simulator, talking to its admin API, reading seeds).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or serving failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An HTTP request of the admin client failed.
    #[error("HTTP error: {0}")]
    Http(#[from] reqwest::Error),
    /// The simulator answered with an API error.
    #[error("simulator answered {status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// Error code from the envelope.
        code: String,
        /// Error message from the envelope.
        message: String,
    },
    /// A seed file could not be read or applied.
    #[error("seed error: {0}")]
    Seed(String),
    /// JSON (de)serialisation failed.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
}

/// An error answer of the API: `{"error": {"code", "message", "details"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Machine readable code.
    pub code: String,
    /// Human readable message.
    pub message: String,
    /// Details (`null` unless the code defines some).
    pub details: Value,
}

/// The HTTP status the real API uses for an error code (422 for operation specific codes).
pub fn status_for_code(code: &str) -> u16 {
    match code {
        "json_error" => 400,
        "unauthorized" | "token_readonly" => 401,
        "forbidden" | "maintenance" | "resource_limit_exceeded" => 403,
        "not_found" => 404,
        "method_not_allowed" => 405,
        "uniqueness_error" | "conflict" => 409,
        "deprecated_api_endpoint" => 410,
        "resource_unavailable" => 412,
        "locked" | "protected" => 423,
        "rate_limit_exceeded" => 429,
        "server_error" => 500,
        "bad_gateway" => 502,
        "unavailable" => 503,
        "timeout" => 504,
        _ => 422,
    }
}

/// The error code the real API uses for a bare HTTP status.
pub fn code_for_status(status: u16) -> &'static str {
    match status {
        400 => "json_error",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        410 => "deprecated_api_endpoint",
        412 => "resource_unavailable",
        423 => "locked",
        429 => "rate_limit_exceeded",
        502 => "bad_gateway",
        503 => "unavailable",
        504 => "timeout",
        422 => "invalid_input",
        _ => "server_error",
    }
}

impl ApiError {
    /// An error with the status that belongs to `code`.
    pub fn new(code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: status_for_code(code),
            code: code.to_string(),
            message: message.into(),
            details: Value::Null,
        }
    }

    /// Overrides the HTTP status.
    pub fn with_status(mut self, status: u16) -> ApiError {
        self.status = status;
        self
    }

    /// 404 `not_found` for a resource kind.
    pub fn not_found(what: &str) -> ApiError {
        ApiError::new("not_found", format!("{what} not found"))
    }

    /// 422 `invalid_input` with field details.
    pub fn invalid_input(fields: &[(String, String)]) -> ApiError {
        let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
        for (name, msg) in fields {
            match grouped.iter_mut().find(|(n, _)| n == name) {
                Some((_, msgs)) => msgs.push(msg.clone()),
                None => grouped.push((name.clone(), vec![msg.clone()])),
            }
        }
        let names: Vec<&str> = grouped.iter().map(|(n, _)| n.as_str()).collect();
        let message = match names.as_slice() {
            [] => "invalid input".to_string(),
            [one] => format!("invalid input in field '{one}'"),
            many => format!("invalid input in fields '{}'", many.join("', '")),
        };
        ApiError {
            status: 422,
            code: "invalid_input".to_string(),
            message,
            details: json!({
                "fields": grouped
                    .iter()
                    .map(|(n, m)| json!({"name": n, "messages": m}))
                    .collect::<Vec<_>>()
            }),
        }
    }

    /// 422 `invalid_input` for one field.
    pub fn field(name: &str, message: impl Into<String>) -> ApiError {
        ApiError::invalid_input(&[(name.to_string(), message.into())])
    }

    /// The JSON envelope.
    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.body())).into_response()
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_table() {
        assert_eq!(status_for_code("json_error"), 400);
        assert_eq!(status_for_code("resource_limit_exceeded"), 403);
        assert_eq!(status_for_code("conflict"), 409);
        assert_eq!(status_for_code("locked"), 423);
        assert_eq!(status_for_code("protected"), 423);
        assert_eq!(status_for_code("target_already_defined"), 422);
        assert_eq!(code_for_status(503), "unavailable");
    }

    #[test]
    fn invalid_input_groups_fields() {
        let e = ApiError::invalid_input(&[
            ("name".into(), "a".into()),
            ("name".into(), "b".into()),
            ("labels".into(), "c".into()),
        ]);
        assert_eq!(e.details["fields"][0]["messages"], json!(["a", "b"]));
        assert_eq!(e.details["fields"][1]["name"], "labels");
    }
}
