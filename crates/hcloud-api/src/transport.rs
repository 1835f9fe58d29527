//! Sending one request: the API's bucket, retries, metrics, error mapping.

use std::time::{Duration, Instant, SystemTime};

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{ClientConfig, RetryConfig, Token, normalize_endpoint};
use crate::credentials::{Reauthorize, Swappable};
use crate::error::{ApiError, ConfigError, Error, ErrorCode, TransportError};
use crate::metrics::Metrics;
use crate::ratelimit::{RateLimitHeaders, Reserve, ServerBucket};
use crate::retry::{
    backoff_delay, is_retryable_api_error, is_retryable_transport_error, is_transient_status,
};

/// How fast the API refills its bucket: one request per second.
const API_REFILL: Duration = Duration::from_secs(1);

/// The largest answer body read. The largest real answers (pages of 50 load balancers with
/// their targets) are a few MB; a longer body is refused as undecodable when its length is
/// announced, or as soon as it grows past this, instead of being held in memory.
pub const MAX_BODY_BYTES: usize = 32 << 20;

/// Query parameters of a request (keys may repeat).
pub(crate) type Query = Vec<(&'static str, String)>;

/// Shared state behind every clone of a client.
pub(crate) struct Transport {
    http: reqwest::Client,
    endpoint: String,
    auth: Swappable<HeaderValue>,
    retry: RetryConfig,
    bucket: ServerBucket,
    max_rate_limit_wait: Duration,
    metrics: Metrics,
}

// By hand: only what is safe to log, never the `Authorization` header.
impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("endpoint", &self.endpoint)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

fn auth_header(token: &Token) -> Result<HeaderValue, ConfigError> {
    if token.is_empty() {
        return Err(ConfigError::EmptyToken {
            variable: "HCLOUD_TOKEN",
        });
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
        ConfigError::InvalidToken {
            variable: "HCLOUD_TOKEN",
        }
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The HTTP client of the Cloud and of the Robot client: their user agent, the timeout of a
/// whole request and of its connect.
pub(crate) fn http_client(
    user_agent: &str,
    timeout: Duration,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ConfigError> {
    reqwest::Client::builder()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| ConfigError::HttpClient(e.to_string()))
}

impl Transport {
    pub(crate) fn new(config: &ClientConfig) -> Result<Self, Error> {
        // reqwest is built without a bundled crypto provider; make sure one is installed.
        // An already installed provider is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();

        let auth = Swappable::new(auth_header(&config.token)?);
        if config.retry.max_tries == 0 {
            return Err(ConfigError::InvalidSetting {
                setting: "retry.max_tries",
                reason: "must be at least 1".to_owned(),
            }
            .into());
        }
        let endpoint = normalize_endpoint(&config.endpoint, "HCLOUD_ENDPOINT")?;
        let http = http_client(
            &config.user_agent,
            config.request_timeout,
            config.connect_timeout,
        )?;
        Ok(Transport {
            http,
            endpoint,
            auth,
            retry: config.retry.clone(),
            bucket: ServerBucket::new(
                API_REFILL,
                config.max_rate_limit_wait,
                Reserve {
                    per_hour: config.rate_limit_reserve,
                },
            ),
            max_rate_limit_wait: config.max_rate_limit_wait,
            metrics: config.metrics.clone().unwrap_or_default(),
        })
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(crate) fn bucket(&self) -> &ServerBucket {
        &self.bucket
    }

    pub(crate) fn set_token(&self, token: &Token) -> Result<(), Error> {
        self.auth.set(auth_header(token)?);
        Ok(())
    }

    pub(crate) fn set_reauthorize(&self, hook: std::sync::Arc<dyn Reauthorize>) -> bool {
        self.auth.set_hook(hook)
    }

    /// POST a JSON body and decode the answer.
    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, Error> {
        let bytes = encode("POST", path, body)?;
        let (status, answer) = self
            .send(Method::POST, path, &Vec::new(), Some(bytes))
            .await?;
        decode("POST", path, status, &answer)
    }

    /// POST without a body (e.g. `enable_public_interface`) and decode the answer.
    pub(crate) async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        let (status, answer) = self.send(Method::POST, path, &Vec::new(), None).await?;
        decode("POST", path, status, &answer)
    }

    /// PUT a JSON body; returns status and body of the answer.
    pub(crate) async fn put_raw<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(u16, Vec<u8>), Error> {
        let bytes = encode("PUT", path, body)?;
        self.send(Method::PUT, path, &Vec::new(), Some(bytes)).await
    }

    /// DELETE; returns the answer body (empty for 204).
    pub(crate) async fn delete(&self, path: &str) -> Result<(u16, Vec<u8>), Error> {
        self.send(Method::DELETE, path, &Vec::new(), None).await
    }

    /// Sends a request with retries; returns status and body of a 2xx answer.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        query: &Query,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), Error> {
        let url = format!("{}{}", self.endpoint, path);
        let mut attempt: u32 = 0;
        let mut reauthorized = false;
        loop {
            attempt += 1;
            let (generation, auth) = self.auth.current();
            let failure = match self
                .try_once(&method, &url, path, query, body.as_ref(), &auth)
                .await
            {
                Ok(Answer {
                    body: None, status, ..
                }) => {
                    return Err(too_long(method.as_str(), path, status));
                }
                Ok(Answer {
                    body: Some(body),
                    status,
                    ..
                }) if (200..300).contains(&status) => {
                    return Ok((status, body));
                }
                Ok(answer) => Failure::Api(
                    Box::new(ApiError::from_response(
                        answer.status,
                        answer.body.as_deref().unwrap_or_default(),
                        method.as_str(),
                        path,
                    )),
                    answer.headers,
                ),
                Err(source) => Failure::Transport(source),
            };
            if matches!(&failure, Failure::Api(e, _) if e.status == 401)
                && !reauthorized
                && self.auth.renewed_since(generation).await
            {
                // Once per request: the token it was sent with was replaced.
                reauthorized = true;
                attempt -= 1;
                tracing::info!(
                    method = %method, path,
                    "hcloud request refused with the previous token; trying again with the new one"
                );
                continue;
            }
            let delay = match self.retry_delay(&method, &failure, attempt) {
                Some(delay) if attempt < self.retry.max_tries => delay,
                _ => return Err(failure.into_error(&method, path)),
            };
            tracing::warn!(
                method = %method, path, attempt, delay_ms = delay.as_millis() as u64,
                error = %failure, "hcloud request failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One try: waits for budget, sends, reads the answer, records metrics (recoveries
    /// included) and rate-limit headers.
    async fn try_once(
        &self,
        method: &Method,
        url: &str,
        path: &str,
        query: &Query,
        body: Option<&Vec<u8>>,
        auth: &HeaderValue,
    ) -> Result<Answer, reqwest::Error> {
        self.wait_for_slot().await;
        let mut request = self
            .http
            .request(method.clone(), url)
            .header(AUTHORIZATION, auth.clone());
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(bytes) = body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(bytes.clone());
        }
        let result = exchange(
            request,
            || dump_request(method, url, query, body.map(Vec::as_slice)),
            &self.metrics,
            method,
            path,
        )
        .await
        .map(|raw| Answer {
            status: raw.status,
            headers: RateLimitHeaders::from_headers(&raw.headers),
            body: raw.body,
        });
        match &result {
            Ok(answer) if (200..300).contains(&answer.status) => self.metrics.record_success(),
            Ok(answer) if is_transient_status(answer.status) => {
                self.metrics.record_transient_failure();
            }
            Ok(_) => {}
            Err(_) => self.metrics.record_transient_failure(),
        }
        if let Ok(answer) = &result {
            self.bucket.observe(&answer.headers);
            if let Some(remaining) = answer.headers.remaining {
                self.metrics.set_rate_limit_remaining(remaining);
            }
            tracing::debug!(method = %method, path, status = answer.status, "hcloud request");
        }
        result
    }

    /// The delay before retrying `failure`, or `None` if it is not retried.
    fn retry_delay(&self, method: &Method, failure: &Failure, attempt: u32) -> Option<Duration> {
        let backoff = backoff_delay(&self.retry, attempt.saturating_sub(1));
        match failure {
            Failure::Transport(e) => is_retryable_transport_error(e, method).then_some(backoff),
            Failure::Api(e, headers) if is_retryable_api_error(e, method) => {
                if e.code == ErrorCode::RateLimitExceeded {
                    // Wait at least until the API's bucket holds a request again.
                    let refill = headers
                        .wait_for_token(SystemTime::now(), API_REFILL)
                        .min(self.max_rate_limit_wait);
                    Some(backoff.max(refill))
                } else {
                    Some(backoff)
                }
            }
            Failure::Api(..) => None,
        }
    }

    /// Waits for the client budget (when one is set) and, if the API reported an empty bucket
    /// or a budget at the reserve, for the next paced slot.
    async fn wait_for_slot(&self) {
        if let Some(slot) = self.bucket.reserve() {
            let wait = slot.saturating_duration_since(Instant::now());
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                "hcloud API budget at the reserve or empty; waiting"
            );
            tokio::time::sleep_until(tokio::time::Instant::from_std(slot)).await;
        }
    }
}

/// An answer as it came: status, headers and body (`None` when it was too long to read).
pub(crate) struct RawAnswer {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Option<Vec<u8>>,
}

/// Sends `request` and reads its whole answer (at most [`MAX_BODY_BYTES`]), recording it in
/// `metrics` (in flight, latency, answers by status) and dumping both sides at TRACE level
/// (`request_dump` must leave the credentials out). Shared by the Cloud and the Robot client;
/// no retries here.
pub(crate) async fn exchange(
    request: reqwest::RequestBuilder,
    request_dump: impl FnOnce() -> String,
    metrics: &Metrics,
    method: &Method,
    path: &str,
) -> Result<RawAnswer, reqwest::Error> {
    if tracing::enabled!(tracing::Level::TRACE) {
        tracing::trace!("--- Request:\n{}", request_dump());
    }
    let started = Instant::now();
    let in_flight = metrics.request_started();
    let result = async {
        let mut response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = read_body(&mut response).await?;
        if tracing::enabled!(tracing::Level::TRACE) {
            tracing::trace!(
                "--- Response:\n{}",
                dump_response(status, &headers, body.as_deref().unwrap_or(b"<too long>"))
            );
        }
        Ok::<_, reqwest::Error>(RawAnswer {
            status,
            headers,
            body,
        })
    }
    .await;
    drop(in_flight);
    let elapsed = started.elapsed().as_secs_f64();
    let status = result.as_ref().ok().map(|a| a.status);
    metrics.observe(method.as_str(), path, status, elapsed);
    result
}

/// The error for an answer longer than [`MAX_BODY_BYTES`] (not read into memory).
pub(crate) fn too_long(method: &str, path: &str, status: u16) -> Error {
    let source = <serde_json::Error as serde::de::Error>::custom(format!(
        "the answer is longer than {MAX_BODY_BYTES} bytes; not read"
    ));
    Error::decode(method, path, status, source)
}

/// Reads the body of `response`; `None` once it is (or announces to be) longer than
/// [`MAX_BODY_BYTES`].
async fn read_body(response: &mut reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let announced = response.content_length().unwrap_or(0);
    if announced > MAX_BODY_BYTES as u64 {
        return Ok(None);
    }
    // The announced length is a hint only: a body without one may still be long.
    let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    while let Some(chunk) = response.chunk().await? {
        let len = body.len() + chunk.len();
        if len > MAX_BODY_BYTES {
            return Ok(None);
        }
        // Grow by doubling, but never past the limit.
        if len > body.capacity() {
            let capacity = len.max(body.capacity() * 2).min(MAX_BODY_BYTES);
            body.reserve_exact(capacity - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// A complete answer; `body` is `None` when it was too long to read.
struct Answer {
    status: u16,
    headers: RateLimitHeaders,
    body: Option<Vec<u8>>,
}

/// A failed try.
enum Failure {
    Api(Box<ApiError>, RateLimitHeaders),
    Transport(reqwest::Error),
}

impl Failure {
    fn into_error(self, method: &Method, path: &str) -> Error {
        match self {
            Failure::Api(e, _) => Error::Api(e),
            Failure::Transport(source) => Error::Transport(TransportError {
                method: method.to_string(),
                path: path.to_owned(),
                source,
            }),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Api(e, _) => write!(f, "{} {}: {}", e.status, e.code, e.message),
            Failure::Transport(e) => write!(f, "{e}"),
        }
    }
}

fn encode<B: Serialize>(method: &str, path: &str, body: &B) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body).map_err(|source| Error::decode(method, path, 0, source))
}

pub(crate) fn decode<T: DeserializeOwned>(
    method: &str,
    path: &str,
    status: u16,
    body: &[u8],
) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|source| Error::decode(method, path, status, source))
}
/// A request as `HCLOUD_DEBUG` shows it (as the official client's debug writer): the request
/// line, the headers but the token (`Authorization: REDACTED`), the body.
pub(crate) fn dump_request(
    method: &Method,
    url: &str,
    query: &Query,
    body: Option<&[u8]>,
) -> String {
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let target = if query.is_empty() {
        url.to_owned()
    } else {
        format!("{url}?{}", query.join("&"))
    };
    let mut dump = format!("{method} {target}\nAuthorization: REDACTED\n");
    if let Some(body) = body {
        dump.push_str("Content-Type: application/json\n\n");
        dump.push_str(&String::from_utf8_lossy(body));
    }
    dump
}

/// An answer as `HCLOUD_DEBUG` shows it: the status, the headers, the body.
fn dump_response(status: u16, headers: &reqwest::header::HeaderMap, body: &[u8]) -> String {
    let mut dump = format!("{status}\n");
    for (name, value) in headers {
        dump.push_str(&format!(
            "{name}: {}\n",
            value.to_str().unwrap_or("<not text>")
        ));
    }
    dump.push('\n');
    dump.push_str(&String::from_utf8_lossy(body));
    dump
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_dumps_show_the_exchange_but_never_the_token() {
        let query: Query = vec![("label_selector", "a=b".to_owned()), ("page", "2".into())];
        let dump = dump_request(
            &Method::POST,
            "https://api.example/v1/load_balancers",
            &query,
            Some(br#"{"name":"web"}"#),
        );
        assert_eq!(
            dump,
            "POST https://api.example/v1/load_balancers?label_selector=a=b&page=2\nAuthorization: REDACTED\nContent-Type: application/json\n\n{\"name\":\"web\"}"
        );
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            "ratelimit-remaining",
            "3599".parse().unwrap_or_else(|_| unreachable!()),
        );
        let dump = dump_response(200, &headers, br#"{"servers":[]}"#);
        assert_eq!(dump, "200\nratelimit-remaining: 3599\n\n{\"servers\":[]}");
    }
}
