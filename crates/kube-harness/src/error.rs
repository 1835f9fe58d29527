use std::path::PathBuf;

/// Everything that can go wrong while starting or using a test control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{what} not found at {path}: run `scripts/control-plane.sh` first (it builds the control plane from Go modules), or set {env}"
    )]
    MissingBinary {
        what: &'static str,
        path: PathBuf,
        env: &'static str,
    },
    #[error("could not {action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not generate test certificates: {0}")]
    Certificates(#[from] rcgen::Error),
    #[error(
        "control plane did not become ready within {seconds} s: {last_error}\n--- kube-apiserver log (tail) ---\n{apiserver_log}\n--- etcd log (tail) ---\n{etcd_log}"
    )]
    NotReady {
        seconds: u64,
        last_error: String,
        apiserver_log: String,
        etcd_log: String,
    },
    #[error("kubeconfig for the test control plane is invalid: {0}")]
    Kubeconfig(String),
    #[error("Kubernetes API call failed while {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("the shared control plane failed to start earlier: {0}")]
    SharedFailed(String),
}

impl Error {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let action = action.into();
        move |source| Error::Io { action, source }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }
}
