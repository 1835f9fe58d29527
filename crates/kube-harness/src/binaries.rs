//! Where the control-plane binaries live.
//!
//! `scripts/control-plane.sh` builds kube-apiserver, kube-controller-manager and kubectl from the
//! `k8s.io/kubernetes` Go module (the wrapper module `tools/kubernetes`) and etcd from
//! `tools/etcd`, and caches all four in one directory per Kubernetes version.

use std::path::{Path, PathBuf};

use crate::Error;

/// Kubernetes version of the control plane the harness runs: the version `tools/kubernetes/go.mod`
/// requires (a unit test keeps the two equal).
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// Environment variable naming a directory of control-plane binaries, instead of the cache entry
/// of [`KUBERNETES_VERSION`] (e.g. the oldest supported Kubernetes, see `scripts/oldest-kubernetes.sh`).
pub const BIN_DIR_ENV: &str = "KUBE_HARNESS_BIN_DIR";

/// The cache root shared with `scripts/control-plane.sh`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HCLOUD_CCM_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("hcloud-ccm-rs")
}

/// The directory of the control-plane binaries: `$KUBE_HARNESS_BIN_DIR`, else the cache entry of
/// [`KUBERNETES_VERSION`].
pub fn bin_dir() -> PathBuf {
    std::env::var_os(BIN_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_root().join("kubernetes").join(KUBERNETES_VERSION))
}

/// Path of the `kube-apiserver` binary: `$KUBE_APISERVER`, else [`bin_dir`]'s.
pub fn kube_apiserver() -> Result<PathBuf, Error> {
    binary("kube-apiserver", "KUBE_APISERVER")
}

/// Path of the `kube-controller-manager` binary: `$KUBE_CONTROLLER_MANAGER`, else [`bin_dir`]'s.
pub fn kube_controller_manager() -> Result<PathBuf, Error> {
    binary("kube-controller-manager", "KUBE_CONTROLLER_MANAGER")
}

/// Path of the `kubectl` binary of the same version: `$KUBECTL`, else [`bin_dir`]'s.
pub fn kubectl() -> Result<PathBuf, Error> {
    binary("kubectl", "KUBECTL")
}

/// Path of the `etcd` binary: `$ETCD`, else [`bin_dir`]'s.
pub fn etcd() -> Result<PathBuf, Error> {
    binary("etcd", "ETCD")
}

fn binary(what: &'static str, env: &'static str) -> Result<PathBuf, Error> {
    let path = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir().join(what));
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary { what, path, env })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_the_one_the_wrapper_module_requires() {
        let go_mod = include_str!("../../../tools/kubernetes/go.mod");
        let required = go_mod
            .lines()
            .find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes v"))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|version| format!("v{version}"));
        assert_eq!(
            required.as_deref(),
            Some(super::KUBERNETES_VERSION),
            "{go_mod}"
        );
    }
}
