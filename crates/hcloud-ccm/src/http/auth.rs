//! Delegated authentication and authorisation for the secure port: a bearer token is checked
//! with a TokenReview (authentication.k8s.io/v1), the resulting user with a SubjectAccessReview
//! (authorization.k8s.io/v1) for the request's non-resource path and verb. Members of
//! `system:masters` are always allowed, as in Kubernetes' delegated authoriser. Decisions are
//! cached for a short time so that frequent scrapes do not load the apiserver.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

/// The group that is allowed everything without asking the apiserver.
pub const ALWAYS_ALLOWED_GROUP: &str = "system:masters";

/// How long a decision is reused.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Bound on cached decisions; the cache is emptied when it is reached.
const CACHE_CAPACITY: usize = 1024;

/// The verdict on one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and authorised.
    Allowed {
        /// The authenticated user.
        user: String,
    },
    /// No token, or a token the apiserver does not accept (HTTP 401).
    Unauthenticated,
    /// Authenticated but not authorised (HTTP 403).
    Forbidden {
        /// The authenticated user.
        user: String,
        /// The apiserver's reason, if any.
        reason: String,
    },
}

/// Why a decision could not be made (HTTP 500).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The TokenReview or SubjectAccessReview request failed.
    #[error("{review} failed: {source}")]
    Review {
        /// Which review.
        review: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Token, path and verb of a cached decision.
type CacheKey = (String, String, String);

/// Checks bearer tokens against the apiserver.
pub struct Authorizer {
    client: kube::Client,
    cache: Mutex<HashMap<CacheKey, (Instant, Decision)>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the cache: its keys are bearer tokens.
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

impl Authorizer {
    /// An authoriser using `client` (which needs create on tokenreviews and
    /// subjectaccessreviews).
    pub fn new(client: kube::Client) -> Self {
        Authorizer {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Decides whether the bearer `token` may `verb` the non-resource `path`.
    pub async fn authorize(
        &self,
        token: Option<&str>,
        path: &str,
        verb: &str,
    ) -> Result<Decision, AuthError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Decision::Unauthenticated);
        };
        let key = (token.to_owned(), path.to_owned(), verb.to_owned());
        if let Some(decision) = self.cached(&key) {
            return Ok(decision);
        }
        let decision = self.review(token, path, verb).await?;
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), decision.clone()));
        Ok(decision)
    }

    fn cached(&self, key: &CacheKey) -> Option<Decision> {
        let cache = self.cache.lock();
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, decision)| decision.clone())
    }

    async fn review(&self, token: &str, path: &str, verb: &str) -> Result<Decision, AuthError> {
        // The token lost its Option in the client types of Kubernetes 1.36.
        k8s_openapi::k8s_if_le_1_35! { let token = Some(token.to_owned()); }
        k8s_openapi::k8s_if_ge_1_36! { let token = token.to_owned(); }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token,
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let review = self.create(&review).await?;
        let status = review.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let username = user.username.clone().unwrap_or_default();
        let groups = user.groups.clone().unwrap_or_default();
        if groups.iter().any(|g| g == ALWAYS_ALLOWED_GROUP) {
            return Ok(Decision::Allowed { user: username });
        }
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let access = self.create(&access).await?;
        let status = access.status.unwrap_or_default();
        if status.allowed && !status.denied.unwrap_or(false) {
            Ok(Decision::Allowed { user: username })
        } else {
            Ok(Decision::Forbidden {
                user: username,
                reason: status.reason.unwrap_or_default(),
            })
        }
    }

    /// Posts a review and returns it with the apiserver's status filled in.
    async fn create<K>(&self, review: &K) -> Result<K, AuthError>
    where
        K: k8s_openapi::Resource + kube::Resource<DynamicType = ()>,
        K: Clone + std::fmt::Debug + DeserializeOwned + Serialize,
    {
        Api::<K>::all(self.client.clone())
            .create(&PostParams::default(), review)
            .await
            .map_err(|source| AuthError::Review {
                review: K::KIND,
                source,
            })
    }
}

/// Whether `path` matches one of the always-allowed patterns (exact, or a prefix when the
/// pattern ends in `*`).
pub fn path_always_allowed(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

/// The token of an `Authorization: Bearer …` header value.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths() {
        let patterns = vec!["/healthz".to_owned(), "/debug/*".to_owned()];
        assert!(path_always_allowed(&patterns, "/healthz"));
        assert!(!path_always_allowed(&patterns, "/healthz/ping"));
        assert!(path_always_allowed(&patterns, "/debug/flags"));
        assert!(!path_always_allowed(&patterns, "/metrics"));
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }
}
