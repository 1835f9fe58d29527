//! The secure port: `--secure-port`, `--bind-address`, TLS files, always-allowed paths.

use std::net::IpAddr;

use super::checker::Checker;
use super::{Args, SecureServingSettings, TlsFiles};

impl Args {
    pub(super) fn check_secure_serving(&self, c: &mut Checker) -> Option<SecureServingSettings> {
        let port: u16 = match self.secure_port.parse() {
            Ok(p) => p,
            Err(_) => {
                c.problem(
                    "--secure-port",
                    format!("{:?} is not a port number (0-65535)", self.secure_port),
                );
                0
            }
        };
        let bind_address: Option<IpAddr> = match self.bind_address.parse() {
            Ok(ip) => Some(ip),
            Err(_) => {
                c.problem(
                    "--bind-address",
                    format!("{:?} is not an IP address", self.bind_address),
                );
                None
            }
        };
        let cert = self
            .tls_cert_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let key = self
            .tls_private_key_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let tls_files = match (cert, key) {
            (Some(cert), Some(key)) => {
                for (flag, path) in [("--tls-cert-file", cert), ("--tls-private-key-file", key)] {
                    if !path.is_file() {
                        c.problem(flag, format!("{} is not a readable file", path.display()));
                    }
                }
                Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                })
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
        let always_allow_paths: Vec<String> = self
            .authorization_always_allow_paths
            .iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        for path in &always_allow_paths {
            if !path.starts_with('/') {
                c.problem(
                    "--authorization-always-allow-paths",
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
}
