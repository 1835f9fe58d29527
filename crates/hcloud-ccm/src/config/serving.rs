//! The secure port: `--secure-port`, `--bind-address`, TLS files, always-allowed paths.

use std::net::IpAddr;
use std::path::PathBuf;

use super::args::SERVING;
use super::checker::{Checker, path};
use super::setting::{Form, Spec, settings};
use super::{SecureServingSettings, TlsFiles};

settings! {
    SETTINGS, SERVING;
    /// HTTPS port for /healthz, /readyz and /metrics; 0 disables it.
    pub(super) SECURE_PORT: u16 = Spec::flag("secure-port", "PORT").default("10258").parse(port);
    /// IP address the secure port listens on.
    pub(super) BIND_ADDRESS: Option<IpAddr> =
        Spec::flag("bind-address", "IP").default("0.0.0.0").parse(ip);
    /// PEM certificate (chain) for the secure port. Without it a self-signed certificate is
    /// generated in memory.
    pub(super) TLS_CERT_FILE: PathBuf =
        Spec::flag("tls-cert-file", "PATH").form(Form::Path).parse(path);
    /// PEM private key matching --tls-cert-file.
    pub(super) TLS_PRIVATE_KEY_FILE: PathBuf =
        Spec::flag("tls-private-key-file", "PATH").form(Form::Path).parse(path);
    /// Paths served on the secure port without authorisation.
    pub(super) ALWAYS_ALLOW_PATHS: Vec<String> =
        Spec::flag("authorization-always-allow-paths", "PATHS")
            .default("/healthz,/readyz,/livez")
            .form(Form::List)
            .parse(paths);
}

/// A port number (0-65535).
pub(super) fn port(value: &str) -> Result<u16, String> {
    value
        .parse()
        .map_err(|_| format!("{value:?} is not a port number (0-65535)"))
}

fn ip(value: &str) -> Result<Option<IpAddr>, String> {
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{value:?} is not an IP address"))
}

fn paths(value: &str) -> Result<Vec<String>, String> {
    Ok(value
        .split(',')
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect())
}

pub(super) fn check_secure_serving(c: &mut Checker<'_>) -> Option<SecureServingSettings> {
    let port = c.value(&SECURE_PORT);
    let bind_address = c.value(&BIND_ADDRESS);
    let cert = c.optional(&TLS_CERT_FILE);
    let key = c.optional(&TLS_PRIVATE_KEY_FILE);
    let tls_files = match (cert, key) {
        (Some(cert), Some(key)) => {
            for (setting, path) in [(&TLS_CERT_FILE, &cert), (&TLS_PRIVATE_KEY_FILE, &key)] {
                if !path.is_file() {
                    c.problem(
                        &setting.spec.name(),
                        format!("{} is not a readable file", path.display()),
                    );
                }
            }
            Some(TlsFiles { cert, key })
        }
        (Some(_), None) => {
            c.problem(
                "--tls-private-key-file",
                "required when --tls-cert-file is set",
            );
            None
        }
        (None, Some(_)) => {
            c.problem(
                "--tls-cert-file",
                "required when --tls-private-key-file is set",
            );
            None
        }
        (None, None) => None,
    };
    let always_allow_paths = c.value(&ALWAYS_ALLOW_PATHS);
    for path in &always_allow_paths {
        if !path.starts_with('/') {
            c.problem(
                &ALWAYS_ALLOW_PATHS.spec.name(),
                format!("{path:?} must start with '/'"),
            );
        }
    }
    match (port, bind_address) {
        (0, _) | (_, None) => None,
        (port, Some(bind_address)) => Some(SecureServingSettings {
            bind_address,
            port,
            tls_files,
            always_allow_paths,
        }),
    }
}
