//! The one mapping from a failed Hetzner call to the provider contract's error.
//!
//! Every capability (instances, routes, load balancers, Robot servers) hands a failed Hetzner
//! Cloud or Robot call to [`categorize`], which looks at the error once (its kind, the API's
//! error code, the HTTP status) and picks the [`Category`] that steers the controllers'
//! retries. The same answer therefore gets the same category in every capability; a call site
//! adds only what it knows beyond the error: the words naming the call, and how long a busy
//! resource of its kind stays busy ([`Call::busy_for`]).
//!
//! | failure | [`Verdict`] | category | retry-after |
//! |---|---|---|---|
//! | `locked` (another action runs on the resource) | [`Verdict::Busy`] | transient | the call's busy delay, if it names one |
//! | `conflict` (the resource changed meanwhile) | [`Verdict::Conflict`] | conflict | the call's busy delay, if it names one |
//! | `not_found` (something the call needs does not exist) | [`Verdict::NotFound`] | not found | — |
//! | the API's refusals: `invalid_input`, `json_error`, `uniqueness_error`, `resource_limit_exceeded`, `resource_unavailable`, `protected`, `unsupported_error`, `method_not_allowed`, `deprecated_api_endpoint` and the load balancer / network codes (`source_port_already_used`, `target_already_defined`, `ip_not_available`, `networks_overlap`, …); Robot's `RESET_NOT_AVAILABLE` | [`Verdict::Refused`] | rejected | — |
//! | Robot's `SERVER_NOT_FOUND` / `NOT_FOUND` | [`Verdict::NotFound`] | not found | — |
//! | Robot support without a client (`ROBOT_ENABLED`, credentials) | [`Verdict::NotConfigured`] | rejected | — |
//! | the Robot rate-limit guard holds calls back | [`Verdict::HeldBack`] | transient | until the guard opens |
//! | everything else: no or broken answer, undecodable answer, 5xx, `maintenance`, `rate_limit_exceeded` (Robot's too), `unauthorized` / `forbidden` / `token_readonly` (Robot's 401 / 403 too), a failed action, an answer without the API's error envelope, a code this client does not know, a listing past its deadline | [`Verdict::Failed`] | transient | — |
//!
//! Why these categories ([`Category`] says what each does):
//!
//! - A refusal is [`Category::Rejected`], not [`Category::User`]: nothing says the object is
//!   wrong, and the world outside it may change what the API accepts (a location available
//!   again, a quota raised, another load balancer letting go of a name), as the official CCM
//!   retries every failure.
//! - Authentication and permission failures are transient: there is no category for "this
//!   process is misconfigured", [`Category::User`] would stop the retries and blame the object,
//!   and the token is fixed outside the object (a rotated Secret), after which the next retry
//!   is to succeed without a grown delay.
//! - A rate limit has no retry-after here: the client already paces itself by the API's
//!   `RateLimit-*` headers, and the answer carries no delay of its own. Only the Robot guard
//!   knows when calls go out again.
//! - `not_found` is [`Category::NotFound`] only because the API said so about something the
//!   call named; a call site that asks whether a resource exists answers that itself before
//!   calling [`categorize`] (`Ok(None)`, `Ok(false)`, absent is success), and a "not found"
//!   category never deletes anything: only [`cloud_provider::Instances::instance_exists`]
//!   answering `Ok(false)` deletes a Node.
//!
//! Special cases that are a call site's own knowledge stay at the call site, as matches
//! before [`categorize`], each with a comment: the route limit (`resource_limit_exceeded` on
//! `add_route`, rejected as here, but in words that name the limit), a taken load balancer name
//! on create (`uniqueness_error`: a load balancer the snapshot did not show yet, so a conflict
//! that looks again), delete protection on delete (success), retries of a busy network inside
//! the route worker, and lookups whose "not found" is an answer.

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{Category, Error};
use hcloud_api::ErrorCode;
use hcloud_api::robot::RobotErrorCode;

use crate::server_cache::CacheError;

/// What a failed call was doing, as [`categorize`] needs it: the words naming the call (the
/// start of the error's message) and, for calls on a resource that actions lock, how long such
/// a resource stays busy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    what: String,
    busy_for: Option<Duration>,
}

impl Call {
    /// A call described by `what` (e.g. `reading network 7`).
    pub fn new(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            busy_for: None,
        }
    }

    /// A `locked` or `conflict` answer is retried no sooner than `delay` (e.g. a load balancer's
    /// [`crate::LoadBalancerSettings::retry_after`]). Without it, such an answer has no
    /// retry-after.
    #[must_use]
    pub fn busy_for(mut self, delay: Duration) -> Self {
        self.busy_for = Some(delay);
        self
    }
}

impl From<String> for Call {
    fn from(what: String) -> Self {
        Self::new(what)
    }
}

impl From<&str> for Call {
    fn from(what: &str) -> Self {
        Self::new(what)
    }
}

/// What a failure says, decided once from the error (see the table of the [module](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `locked`: another action runs on the resource.
    Busy,
    /// `conflict`: the resource changed meanwhile.
    Conflict,
    /// Something the call needs does not exist.
    NotFound,
    /// The API (or Robot) refused the request.
    Refused,
    /// The call cannot be made: Robot support has no client.
    NotConfigured,
    /// A client-side guard holds calls back for this long.
    HeldBack(Duration),
    /// Anything else: no answer, a server error, a rate limit, a failed authentication.
    Failed,
}

impl Verdict {
    /// The category of errors with this verdict.
    pub fn category(self) -> Category {
        match self {
            Self::Busy | Self::HeldBack(_) | Self::Failed => Category::Transient,
            Self::Conflict => Category::Conflict,
            Self::NotFound => Category::NotFound,
            Self::Refused | Self::NotConfigured => Category::Rejected,
        }
    }

    /// The verdict on an error of the Hetzner client (Cloud API or Robot).
    pub fn of(err: &hcloud_api::Error) -> Self {
        match err {
            hcloud_api::Error::Api(answer) => Self::of_code(&answer.code),
            hcloud_api::Error::Robot(answer) => Self::of_robot_code(&answer.code),
            // No (complete) answer, an undecodable one, a failed action, a client that cannot
            // be built, or a kind of failure the client adds later: nothing says that a retry
            // cannot help.
            _ => Self::Failed,
        }
    }

    /// The verdict on a Cloud API answer with `code`. Every known code is listed, so that a code
    /// added to the client is decided here too.
    fn of_code(code: &ErrorCode) -> Self {
        use ErrorCode as C;
        match code {
            C::Locked => Self::Busy,
            C::Conflict => Self::Conflict,
            C::NotFound => Self::NotFound,
            C::InvalidInput
            | C::JsonError
            | C::UniquenessError
            | C::ResourceLimitExceeded
            | C::ResourceUnavailable
            | C::Protected
            | C::UnsupportedError
            | C::MethodNotAllowed
            | C::DeprecatedApiEndpoint
            | C::InvalidLoadBalancerType
            | C::SourcePortAlreadyUsed
            | C::TargetAlreadyDefined
            | C::CloudResourceIpNotAllowed
            | C::TargetsWithoutUsePrivateIp
            | C::NetworksOverlap
            | C::ServerNotAttachedToNetwork
            | C::MissingIpv4
            | C::LoadBalancerNotAttachedToNetwork
            | C::LoadBalancerAlreadyAttached
            | C::IpNotAvailable
            | C::NoSubnetAvailable => Self::Refused,
            C::Unauthorized
            | C::TokenReadonly
            | C::Forbidden
            | C::RateLimitExceeded
            | C::Maintenance
            | C::ServiceError
            | C::ServerError
            | C::BadGateway
            | C::Unavailable
            | C::Timeout
            | C::ActionFailed
            // A bare answer (a proxy's page) or a code this client does not know.
            | C::Unknown(_) => Self::Failed,
        }
    }

    /// The verdict on a Robot answer with `code`. Every known code is listed, as for the Cloud
    /// API's.
    fn of_robot_code(code: &RobotErrorCode) -> Self {
        use RobotErrorCode as R;
        match code {
            R::ServerNotFound | R::NotFound => Self::NotFound,
            R::ResetNotAvailable => Self::Refused,
            // The rate limit also comes as a bare 403 (`Unknown("")`): transient all the same.
            R::Unauthorized | R::RateLimitExceeded | R::InternalError | R::Unknown(_) => {
                Self::Failed
            }
        }
    }
}

/// A failure [`categorize`] maps: an error of the Hetzner client, shared or not, or a failed
/// lookup of a cache in front of it.
pub trait Failure: std::error::Error + Send + Sync + 'static {
    /// What the failure says.
    fn verdict(&self) -> Verdict;
}

impl Failure for hcloud_api::Error {
    fn verdict(&self) -> Verdict {
        Verdict::of(self)
    }
}

impl Failure for Arc<hcloud_api::Error> {
    fn verdict(&self) -> Verdict {
        Verdict::of(self)
    }
}

impl Failure for CacheError {
    fn verdict(&self) -> Verdict {
        match self {
            Self::Api(err) => Verdict::of(err),
            Self::Deadline(_) => Verdict::Failed,
            Self::RobotNotConfigured => Verdict::NotConfigured,
            Self::RobotRateLimited { retry_in, .. } => Verdict::HeldBack(*retry_in),
        }
    }
}

/// The provider's error for `err`, a failure of `call`: its category decided by the error alone
/// ([`Verdict`]), its message starting with the call's words, `err` kept as the cause (in the
/// message where the constructor takes no cause).
pub fn categorize<E: Failure>(call: impl Into<Call>, err: E) -> Error {
    let Call { what, busy_for } = call.into();
    match err.verdict() {
        Verdict::Busy => match busy_for {
            Some(delay) => Error::retry(format!("{what}: busy with another action ({err})"), delay),
            None => Error::transient(format!("{what}: busy with another action"), err),
        },
        Verdict::Conflict => Error::conflict(format!("{what}: {err}"), busy_for),
        Verdict::NotFound => Error::not_found(what, err),
        Verdict::Refused => {
            Error::rejected_by(format!("{what}: the API rejected the request"), err)
        }
        Verdict::NotConfigured => Error::rejected(format!("{what}: {err}")),
        Verdict::HeldBack(delay) => Error::retry(format!("{what}: {err}"), delay),
        Verdict::Failed => Error::transient(format!("cloud API call failed: {what}"), err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::robot::RobotApiError;

    fn api(status: u16, code: &str) -> hcloud_api::Error {
        hcloud_api::Error::Api(Box::new(hcloud_api::ApiError {
            status,
            code: ErrorCode::from(code),
            message: "m".into(),
            details: hcloud_api::ErrorDetails::default(),
            method: "POST".into(),
            path: "/load_balancers".into(),
        }))
    }

    fn robot(status: u16, code: &str) -> hcloud_api::Error {
        hcloud_api::Error::Robot(Box::new(RobotApiError {
            status,
            code: RobotErrorCode::from(code),
            message: "m".into(),
            method: "GET".into(),
            path: "/reset/321".into(),
        }))
    }

    fn transport() -> hcloud_api::Error {
        // A builder error: made without a client (and without TLS).
        let source = reqwest::Proxy::http("http://[not an address").expect_err("a bad URL");
        hcloud_api::Error::Transport(hcloud_api::TransportError {
            method: "GET".into(),
            path: "/servers".into(),
            source,
        })
    }

    fn decode() -> hcloud_api::Error {
        hcloud_api::Error::Decode(hcloud_api::DecodeError {
            method: "GET".into(),
            path: "/servers".into(),
            status: 200,
            source: serde_json::from_str::<u8>("x").expect_err("not JSON"),
        })
    }

    fn action() -> hcloud_api::Error {
        hcloud_api::Error::Action(hcloud_api::ActionError {
            id: 1,
            command: "add_route".into(),
            code: "action_failed".into(),
            message: "m".into(),
        })
    }

    const BUSY: Duration = Duration::from_secs(5);

    /// Every Cloud API code, Robot answer and other failure: its category, and its retry-after
    /// with and without a busy delay.
    #[test]
    fn every_failure_maps_onto_one_category() {
        use Category::{Conflict, NotFound, Rejected, Transient};
        let held = Duration::from_secs(42);
        let cases: Vec<(&str, hcloud_api::Error, Category, Option<Duration>)> = vec![
            ("locked", api(423, "locked"), Transient, Some(BUSY)),
            ("conflict", api(409, "conflict"), Conflict, Some(BUSY)),
            ("not_found", api(404, "not_found"), NotFound, None),
            ("invalid_input", api(422, "invalid_input"), Rejected, None),
            ("json_error", api(400, "json_error"), Rejected, None),
            (
                "uniqueness_error",
                api(409, "uniqueness_error"),
                Rejected,
                None,
            ),
            ("limit", api(403, "resource_limit_exceeded"), Rejected, None),
            (
                "unavailable res",
                api(422, "resource_unavailable"),
                Rejected,
                None,
            ),
            ("protected", api(422, "protected"), Rejected, None),
            ("unsupported", api(422, "unsupported_error"), Rejected, None),
            ("method", api(405, "method_not_allowed"), Rejected, None),
            (
                "deprecated",
                api(410, "deprecated_api_endpoint"),
                Rejected,
                None,
            ),
            (
                "lb type",
                api(422, "invalid_load_balancer_type"),
                Rejected,
                None,
            ),
            ("port", api(409, "source_port_already_used"), Rejected, None),
            ("target", api(422, "target_already_defined"), Rejected, None),
            (
                "cloud ip",
                api(422, "cloud_resource_ip_not_allowed"),
                Rejected,
                None,
            ),
            (
                "private ip",
                api(422, "targets_without_use_private_ip"),
                Rejected,
                None,
            ),
            ("overlap", api(422, "networks_overlap"), Rejected, None),
            (
                "server net",
                api(422, "server_not_attached_to_network"),
                Rejected,
                None,
            ),
            (
                "lb net",
                api(422, "load_balancer_not_attached_to_network"),
                Rejected,
                None,
            ),
            (
                "attached",
                api(422, "load_balancer_already_attached"),
                Rejected,
                None,
            ),
            ("ip", api(422, "ip_not_available"), Rejected, None),
            ("subnet", api(422, "no_subnet_available"), Rejected, None),
            ("unauthorized", api(401, "unauthorized"), Transient, None),
            ("readonly", api(403, "token_readonly"), Transient, None),
            ("forbidden", api(403, "forbidden"), Transient, None),
            (
                "rate limit",
                api(429, "rate_limit_exceeded"),
                Transient,
                None,
            ),
            ("maintenance", api(503, "maintenance"), Transient, None),
            ("service_error", api(503, "service_error"), Transient, None),
            ("server_error", api(500, "server_error"), Transient, None),
            ("bad_gateway", api(502, "bad_gateway"), Transient, None),
            ("unavailable", api(503, "unavailable"), Transient, None),
            ("timeout", api(504, "timeout"), Transient, None),
            ("action_failed", api(422, "action_failed"), Transient, None),
            ("bare 502", api(502, ""), Transient, None),
            ("bare 404", api(404, ""), Transient, None),
            ("unknown code", api(422, "brand_new_code"), Transient, None),
            (
                "robot not found",
                robot(404, "SERVER_NOT_FOUND"),
                NotFound,
                None,
            ),
            (
                "robot bare NOT_FOUND",
                robot(404, "NOT_FOUND"),
                NotFound,
                None,
            ),
            (
                "robot no reset",
                robot(404, "RESET_NOT_AVAILABLE"),
                Rejected,
                None,
            ),
            (
                "robot rate limit",
                robot(403, "RATE_LIMIT_EXCEEDED"),
                Transient,
                None,
            ),
            ("robot bare 403", robot(403, ""), Transient, None),
            (
                "robot unauthorized",
                robot(401, "UNAUTHORIZED"),
                Transient,
                None,
            ),
            ("robot 500", robot(500, "INTERNAL_ERROR"), Transient, None),
            (
                "robot unknown",
                robot(409, "SOMETHING_NEW"),
                Transient,
                None,
            ),
            ("transport", transport(), Transient, None),
            ("decode", decode(), Transient, None),
            ("action", action(), Transient, None),
            (
                "config",
                hcloud_api::ConfigError::HttpClient("x".into()).into(),
                Transient,
                None,
            ),
        ];
        for (name, err, category, busy_retry_after) in cases {
            assert_eq!(Verdict::of(&err).category(), category, "{name}");
            let shared = Arc::new(err);
            let busy = categorize(Call::new("calling").busy_for(BUSY), shared.clone());
            assert_eq!(busy.category(), category, "{name}: {busy}");
            assert_eq!(busy.retry_after(), busy_retry_after, "{name}: {busy}");
            assert!(busy.to_string().contains("calling"), "{name}: {busy}");
            let plain = categorize("calling", shared.clone());
            assert_eq!(plain.category(), category, "{name}: {plain}");
            assert_eq!(plain.retry_after(), None, "{name}: {plain}");
            let cached = categorize("calling", CacheError::Api(shared));
            assert_eq!(cached.category(), category, "{name}: {cached}");
        }

        let cache_cases = [
            (CacheError::Deadline(BUSY), Transient, None),
            (CacheError::RobotNotConfigured, Rejected, None),
            (
                CacheError::RobotRateLimited {
                    next_try: "2026-01-01T00:00:42Z".into(),
                    retry_in: held,
                },
                Transient,
                Some(held),
            ),
        ];
        for (err, category, retry_after) in cache_cases {
            let name = err.to_string();
            let mapped = categorize(Call::new("calling").busy_for(BUSY), err);
            assert_eq!(mapped.category(), category, "{name}: {mapped}");
            assert_eq!(mapped.retry_after(), retry_after, "{name}: {mapped}");
        }
    }

    /// The messages name the call, and a busy resource says so (the cause is in the message
    /// where the error keeps no source).
    #[test]
    fn messages_name_the_call_and_keep_the_cause() {
        let busy = categorize(
            Call::new("adding a target").busy_for(BUSY),
            api(423, "locked"),
        );
        let text = busy.to_string();
        assert!(text.starts_with("adding a target: busy"), "{text}");
        assert!(text.contains("423 locked"), "{text}");

        let not_found = categorize("reading server 7", api(404, "not_found"));
        assert_eq!(not_found.to_string(), "not found: reading server 7");
        assert!(std::error::Error::source(&not_found).is_some());

        let failed = categorize("reading network 7", api(503, "unavailable"));
        assert_eq!(
            failed.to_string(),
            "cloud API call failed: reading network 7"
        );
        assert!(std::error::Error::source(&failed).is_some());

        let unconfigured = categorize("looking up Robot server 1", CacheError::RobotNotConfigured);
        assert!(
            unconfigured.to_string().contains("ROBOT_ENABLED"),
            "{unconfigured}"
        );
    }

    /// No code of this crate builds the error of a failed cloud call without looking at it:
    /// the category-blind `Error::api` constructors are not used here.
    #[test]
    fn every_cloud_error_goes_through_categorize() {
        fn sources(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    sources(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    found.push(path);
                }
            }
        }
        let mut files = Vec::new();
        sources(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        assert!(files.len() > 10, "{files:?}");
        let blind = [concat!("Error::", "api("), concat!("Error::", "api_msg(")];
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for pattern in blind {
                assert!(
                    !text.contains(pattern),
                    "{}: {pattern}: use crate::errors::categorize",
                    file.display()
                );
            }
        }
    }
}
