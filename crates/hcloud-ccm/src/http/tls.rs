//! TLS material for the secure port: PEM files from `--tls-cert-file` / `--tls-private-key-file`,
//! or a self-signed certificate generated in memory (as Kubernetes components do without
//! `--cert-dir` content). Always built on rustls' `ring` provider.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::config::TlsFiles;

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot load {what} from {path}: {message}")]
    Pem {
        /// "certificate" or "private key".
        what: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The certificate file holds no certificate.
    #[error("{0} contains no certificate")]
    NoCertificate(String),
    /// Certificate generation failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls rejected the material (e.g. key does not match the certificate).
    #[error("invalid TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct CertifiedKey {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's key.
    pub key: PrivateKeyDer<'static>,
}

/// Reads a PEM certificate chain and key.
pub fn load_pem_files(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    let pem_error = |what, path: &Path, e: &dyn std::fmt::Display| TlsError::Pem {
        what,
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| pem_error("certificate", &files.cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error("certificate", &files.cert, &e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(files.cert.display().to_string()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| pem_error("private key", &files.key, &e))?;
    Ok(CertifiedKey { chain, key })
}

/// A self-signed certificate for `names` (DNS names or IP addresses), valid for a year.
pub fn self_signed(names: &[String]) -> Result<CertifiedKey, TlsError> {
    let generated = rcgen::generate_simple_self_signed(names.to_vec())?;
    Ok(CertifiedKey {
        chain: vec![generated.cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            generated.signing_key.serialize_der(),
        )),
    })
}

/// The names put into the self-signed certificate: localhost, loopback addresses, the host
/// name and the bind address when it is a specific one.
pub fn self_signed_names(bind_address: std::net::IpAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if let Some(host) = hostname::get().ok().and_then(|h| h.into_string().ok())
        && !host.is_empty()
        && !names.contains(&host)
    {
        names.push(host);
    }
    if !bind_address.is_unspecified() && !bind_address.is_loopback() {
        names.push(bind_address.to_string());
    }
    names
}

/// A rustls server configuration (ring provider, TLS 1.2 and 1.3, HTTP/1.1 ALPN).
pub fn server_config(key: CertifiedKey) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(key.chain, key.key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_config_builds() {
        let key = self_signed(&self_signed_names("0.0.0.0".parse().unwrap())).unwrap();
        assert_eq!(key.chain.len(), 1);
        server_config(key).unwrap();
    }

    #[test]
    fn pem_files_round_trip_and_errors_name_the_file() {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        server_config(load_pem_files(&files).unwrap()).unwrap();

        std::fs::write(&key, "not a key").unwrap();
        let err = load_pem_files(&files).unwrap_err().to_string();
        assert!(
            err.contains("private key") && err.contains("tls.key"),
            "{err}"
        );
        std::fs::write(&cert, "").unwrap();
        assert!(matches!(
            load_pem_files(&files),
            Err(TlsError::NoCertificate(_))
        ));
    }
}
