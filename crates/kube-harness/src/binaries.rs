//! Where the control-plane binaries live.
//!
//! `kube-apiserver` is built from Debian's Kubernetes source package by `scripts/control-plane.sh`
//! and cached outside the repository; `etcd` comes from Debian's `etcd-server` package.

use std::path::{Path, PathBuf};

use crate::Error;

/// Kubernetes version of the cached apiserver the harness runs.
pub const KUBERNETES_VERSION: &str = "1.20.2";

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

/// Path of the `kube-apiserver` binary: `$KUBE_APISERVER`, else the versioned cache entry.
pub fn kube_apiserver() -> Result<PathBuf, Error> {
    let path = std::env::var_os("KUBE_APISERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            cache_root()
                .join("kube-apiserver")
                .join(KUBERNETES_VERSION)
                .join("kube-apiserver")
        });
    existing(path, "kube-apiserver", "KUBE_APISERVER")
}

/// Path of the `etcd` binary: `$ETCD`, else the first `etcd` on `PATH`.
pub fn etcd() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os("ETCD") {
        return existing(PathBuf::from(path), "etcd", "ETCD");
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("etcd"))
            .find(|candidate| candidate.is_file())
    });
    existing(
        found.unwrap_or_else(|| PathBuf::from("/usr/bin/etcd")),
        "etcd",
        "ETCD",
    )
}

fn existing(path: PathBuf, what: &'static str, env: &'static str) -> Result<PathBuf, Error> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary { what, path, env })
    }
}
