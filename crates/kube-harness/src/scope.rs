//! A label scope in front of a shared control plane, so that processes that watch *every*
//! Node or Service (a cloud-controller-manager) can share one apiserver with other tests.
//!
//! [`ScopedEndpoint`] is a plain-HTTP endpoint on loopback that forwards every request to the
//! control plane through a `kube::Client` (whose identity the apiserver sees: RBAC and the audit
//! log work as without it). Lists and watches of the collections of Nodes and Services
//! (`GET /api/v1/nodes`, `/api/v1/services`, `/api/v1/namespaces/NS/services`) get the
//! endpoint's label selector added, so the process behind it sees only the objects of its own
//! test. Everything else passes unchanged: reads of one object by name, writes, events, leases.
//! The process under test is not changed in any way; it only sees a cluster that holds just
//! its test's Nodes and Services.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body as AxumBody;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use tokio::task::JoinHandle;

use crate::Error;

/// Request bodies (patches, creates) above this size are refused; nothing in a test comes near.
const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;

/// A plain-HTTP endpoint that shows the control plane behind `upstream` scoped to the objects
/// that carry a label selector. Stops when dropped.
#[derive(Debug)]
pub struct ScopedEndpoint {
    url: String,
    selector: String,
    server: JoinHandle<()>,
}

#[derive(Clone)]
struct Upstream {
    client: kube::Client,
    selector: Arc<str>,
}

impl ScopedEndpoint {
    /// Serve on a free loopback port, forwarding with `upstream` (build it with the identity
    /// the process under test should have), and add `selector` (e.g. `harness-scope=abc`) to
    /// lists and watches of Nodes and Services.
    pub async fn start(upstream: kube::Client, selector: &str) -> Result<ScopedEndpoint, Error> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(Error::io("bind the scoped endpoint"))?;
        let addr = listener
            .local_addr()
            .map_err(Error::io("read the scoped endpoint's address"))?;
        let state = Upstream {
            client: upstream,
            selector: Arc::from(selector),
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let server = tokio::spawn(async move {
            // Ends with an error only when the listener fails; the test then sees refused
            // connections, which is loud enough.
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScopedEndpoint {
            url: format!("http://{addr}"),
            selector: selector.to_owned(),
            server,
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The label selector added to lists and watches.
    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// A kubeconfig for the endpoint: no credentials, the endpoint authenticates upstream.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: scoped\n  cluster:\n    server: {}\nusers:\n- name: scoped\n  user: {{}}\ncontexts:\n- name: scoped\n  context:\n    cluster: scoped\n    user: scoped\n    namespace: default\ncurrent-context: scoped\n",
            self.url
        )
    }

    /// A client of the endpoint (sees what the process under test sees). Build it inside the
    /// runtime that uses it.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        crate::control_plane::client_from_yaml(&self.kubeconfig_yaml()).await
    }

    /// Write [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig_yaml())
            .map_err(Error::io(format!("write kubeconfig {}", path.display())))
    }
}

impl Drop for ScopedEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Whether `path` is the collection of Nodes or of Services (all, or of one namespace).
fn is_scoped_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match segments.as_slice() {
        ["", "api", "v1", "nodes"] | ["", "api", "v1", "services"] => true,
        ["", "api", "v1", "namespaces", namespace, "services"] => !namespace.is_empty(),
        _ => false,
    }
}

/// Percent-encode `value` for a query string.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `query` with `selector` added to its `labelSelector` (or as a new one).
fn scoped_query(query: Option<&str>, selector: &str) -> String {
    let encoded = encode(selector);
    let mut found = false;
    let mut parts: Vec<String> = query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|part| match part.strip_prefix("labelSelector=") {
            Some(existing) if !existing.is_empty() => {
                found = true;
                format!("labelSelector={existing}%2C{encoded}")
            }
            Some(_) => {
                found = true;
                format!("labelSelector={encoded}")
            }
            None => part.to_owned(),
        })
        .collect();
    if !found {
        parts.push(format!("labelSelector={encoded}"));
    }
    parts.join("&")
}

/// The path and query the request goes upstream with.
fn upstream_target(method: &http::Method, uri: &http::Uri, selector: &str) -> String {
    let path = uri.path();
    if method == http::Method::GET && is_scoped_collection(path) {
        format!("{path}?{}", scoped_query(uri.query(), selector))
    } else {
        uri.path_and_query()
            .map_or_else(|| path.to_owned(), |pq| pq.as_str().to_owned())
    }
}

async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BODY).await {
        Ok(body) => body,
        Err(err) => {
            return (StatusCode::BAD_REQUEST, format!("request body: {err}")).into_response();
        }
    };
    let target = upstream_target(&parts.method, &parts.uri, &upstream.selector);
    let mut builder = http::Request::builder().method(parts.method).uri(target);
    for (name, value) in &parts.headers {
        // The upstream client sets its own host, length and credentials.
        if name != header::HOST && name != header::CONTENT_LENGTH && name != header::AUTHORIZATION {
            builder = builder.header(name, value);
        }
    }
    let request = match builder.body(kube::client::Body::from(body)) {
        Ok(request) => request,
        Err(err) => return (StatusCode::BAD_REQUEST, err.to_string()).into_response(),
    };
    match upstream.client.send(request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, AxumBody::new(body))
        }
        Err(err) => (StatusCode::BAD_GATEWAY, format!("upstream: {err}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_collections_of_nodes_and_services_are_scoped() {
        for path in [
            "/api/v1/nodes",
            "/api/v1/nodes/",
            "/api/v1/services",
            "/api/v1/namespaces/web/services",
        ] {
            assert!(is_scoped_collection(path), "{path}");
        }
        for path in [
            "/api/v1/nodes/node-1",
            "/api/v1/nodes/node-1/status",
            "/api/v1/namespaces/web/services/svc",
            "/api/v1/namespaces/web/services/svc/status",
            "/api/v1/namespaces/default/events",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            "/api/v1/pods",
        ] {
            assert!(!is_scoped_collection(path), "{path}");
        }
    }

    #[test]
    fn the_selector_is_added_to_the_query() {
        let selector = "harness-scope=a1";
        assert_eq!(
            scoped_query(None, selector),
            "labelSelector=harness-scope%3Da1"
        );
        assert_eq!(
            scoped_query(Some("watch=true&resourceVersion=5"), selector),
            "watch=true&resourceVersion=5&labelSelector=harness-scope%3Da1"
        );
        assert_eq!(
            scoped_query(Some("labelSelector=lb%3Dyes&limit=100"), selector),
            "labelSelector=lb%3Dyes%2Charness-scope%3Da1&limit=100"
        );
        assert_eq!(
            scoped_query(Some("labelSelector=&limit=1"), selector),
            "labelSelector=harness-scope%3Da1&limit=1"
        );
    }

    #[test]
    fn writes_and_single_objects_pass_unchanged() {
        let uri: http::Uri = "/api/v1/nodes/node-1?fieldManager=x".parse().unwrap();
        assert_eq!(
            upstream_target(&http::Method::GET, &uri, "s=1"),
            "/api/v1/nodes/node-1?fieldManager=x"
        );
        let uri: http::Uri = "/api/v1/nodes".parse().unwrap();
        assert_eq!(
            upstream_target(&http::Method::POST, &uri, "s=1"),
            "/api/v1/nodes"
        );
        assert_eq!(
            upstream_target(&http::Method::GET, &uri, "s=1"),
            "/api/v1/nodes?labelSelector=s%3D1"
        );
    }
}
