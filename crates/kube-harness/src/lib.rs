//! Test harness: a private etcd + kube-apiserver on loopback with ready `kube` clients.
//!
//! The apiserver is the Kubernetes of [`KUBERNETES_VERSION`], built with etcd from their Go
//! modules by `scripts/control-plane.sh` (cached outside the repository, see [`bin_dir`]).
//! Each control plane gets free loopback ports, a temporary data directory, HTTPS with freshly
//! generated certificates, `--authorization-mode=RBAC`, a cluster-admin client certificate and
//! a ServiceAccount signing key (so [`ControlPlane::service_account_client`] can act as any
//! ServiceAccount and prove RBAC rules).
//!
//! # Isolation
//! Three ways, all torn down even when a test panics (see [`ControlPlane`]):
//! - [`ControlPlane::shared`]: one control plane per test binary. Starting one costs 2–4 s of
//!   CPU on a 2-core machine, so tests that only create, read and patch objects share it and
//!   isolate themselves by name ([`unique_name`]) and, for namespaced objects, by a namespace
//!   of their own.
//! - [`ControlPlane::start`]: a private control plane for one test. Rarely needed now: tests
//!   whose subject watches *every* Node or Service share a plane through a scope instead.
//! - Scopes, for subjects that watch every Node or Service and would otherwise act on objects
//!   of concurrently running tests. The framework's controllers, run in-process, narrow what
//!   they watch with `cloud-provider`'s `WatchScope` (a label on the test's Nodes and Services,
//!   a namespace of its own). A process (the CCM binary) talks to a [`ScopedEndpoint`]: a
//!   loopback endpoint that forwards to the shared plane and adds a label selector to lists and
//!   watches of Nodes and Services, so it sees only its test's objects. Writes, reads by name,
//!   events and leases pass unchanged, with the identity of the client the endpoint forwards
//!   with.
//!
//! Under `cargo nextest`, which runs each test in its own process, the shared plane degrades
//! gracefully into one plane per test.
//!
//! # Counting starts
//! When the environment variable `KUBE_HARNESS_START_LOG` ([`START_LOG_ENV`]) names a file,
//! every kube-apiserver start (every attempt, also the retries after a port clash) appends one
//! tab-separated line to it: the time (RFC 3339), the test binary without Cargo's hash suffix,
//! and the starting thread, which `cargo test` names after the test (`kube-harness-shared` for
//! the shared plane). For example, the starts per test binary of a whole run:
//!
//! ```sh
//! KUBE_HARNESS_START_LOG=/tmp/starts.log cargo test
//! cut -f2 /tmp/starts.log | sort | uniq -c
//! ```
//!
//! A start fails when the line cannot be written, so the count is never silently short.

mod binaries;
mod control_plane;
mod error;
mod pki;
mod scope;
pub mod testing;

pub use binaries::{
    BIN_DIR_ENV, KUBERNETES_VERSION, bin_dir, cache_root, etcd, kube_apiserver,
    kube_controller_manager, kubectl,
};
pub use control_plane::{ControlPlane, Options, START_LOG_ENV, ensure_namespace};
pub use error::Error;
pub use scope::ScopedEndpoint;
pub use testing::{
    UNINITIALIZED_TAINT, eventually, has_taint, kubelet_node, ready_condition, taints,
};

/// `prefix` followed by a random suffix; a valid DNS-1123 label when `prefix` is one.
pub fn unique_name(prefix: &str) -> String {
    use rand::Rng as _;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..8)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("{prefix}-{suffix}")
}
