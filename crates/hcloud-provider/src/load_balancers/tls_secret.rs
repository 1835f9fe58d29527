//! Certificates uploaded from a `kubernetes.io/tls` Secret (the annotation
//! `http-certificate-secret`, beyond the official CCM).
//!
//! The Secret's content is read (through the caller's [`cloud_provider::secrets::TlsSecrets`])
//! on every ensure of the Service, and its digest ([`digest`]) compared with the certificate
//! uploaded from it, which carries the Service's UID, the Secret's name and the digest as
//! labels. A Secret that changed (a cert-manager renewal) is uploaded again under a free
//! name, the https services are switched to the new certificate, and the old one is deleted
//! after the swap. The digest of the last upload is remembered, so an ensure with an
//! unchanged Secret costs no certificate request.

use cloud_provider::secrets::TlsSecret;
use hcloud_api::models::{self, Certificate};

use super::naming::SERVICE_UID_LABEL;

/// Label of a certificate uploaded from a Secret: the Secret's name (cut to a label value).
pub const SECRET_LABEL: &str = "hcloud-ccm/tls-secret";
/// Label of a certificate uploaded from a Secret: the digest of the content it was made of.
pub const DIGEST_LABEL: &str = "hcloud-ccm/tls-secret-digest";

/// A Secret's content as the Service's certificate is made of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretCertificate {
    /// The Secret, as `namespace/name` (for messages).
    pub secret: String,
    /// The Secret's name, as its certificate's [`SECRET_LABEL`] carries it.
    pub label: String,
    /// The content.
    pub content: TlsSecret,
    /// [`digest`] of the content.
    pub digest: String,
    /// The name it is uploaded under when no certificate has it yet (see `decide::free_name`).
    pub name: String,
}

impl SecretCertificate {
    /// What the Service with `uid` makes of the Secret `name` of `namespace` with `content`.
    pub fn new(uid: &str, namespace: &str, name: &str, content: TlsSecret) -> Self {
        Self {
            secret: format!("{namespace}/{name}"),
            label: label_value(name),
            digest: digest(&content),
            content,
            name: format!("ccm-tls-secret-{uid}"),
        }
    }

    /// Whether `cert` was uploaded from this content.
    pub fn made(&self, cert: &Certificate) -> bool {
        cert.labels.get(DIGEST_LABEL) == Some(&self.digest)
    }

    /// The labels of its upload for the Service with `uid` (the cluster label is added by the
    /// caller).
    pub fn labels(&self, uid: &str) -> models::Labels {
        let mut labels = models::Labels::new();
        labels.insert(SERVICE_UID_LABEL.to_owned(), uid.to_owned());
        labels.insert(SECRET_LABEL.to_owned(), self.label.clone());
        labels.insert(DIGEST_LABEL.to_owned(), self.digest.clone());
        labels
    }
}

/// Whether `cert` was uploaded from a Secret by this CCM (whichever Secret, whichever
/// content).
pub fn from_secret(cert: &Certificate) -> bool {
    cert.kind == Some(models::CertificateType::Uploaded) && cert.labels.contains_key(SECRET_LABEL)
}

/// The digest of a Secret's content: SHA-256 of the certificate and the key, the first 128
/// bits in hex (a label value holds at most 63 characters).
pub fn digest(content: &TlsSecret) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(content.certificate.as_bytes());
    context.update(&[0]);
    context.update(content.private_key.as_bytes());
    context
        .finish()
        .as_ref()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `name` as a label value: at most 63 characters, ending in a letter or digit.
fn label_value(name: &str) -> String {
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(certificate: &str, private_key: &str) -> TlsSecret {
        TlsSecret {
            certificate: certificate.to_owned(),
            private_key: private_key.to_owned(),
        }
    }

    #[test]
    fn the_digest_follows_the_content_and_fits_a_label() {
        let a = digest(&content("CERT", "KEY"));
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, digest(&content("CERT", "KEY")));
        assert_ne!(a, digest(&content("CERT", "KEY2")));
        // The boundary between the two is part of the digest.
        assert_ne!(digest(&content("CERTK", "EY")), a);
    }

    #[test]
    fn a_long_secret_name_is_cut_to_a_label_value() {
        assert_eq!(label_value("web-tls"), "web-tls");
        let long = format!("{}-.{}", "a".repeat(61), "b".repeat(10));
        assert_eq!(label_value(&long), "a".repeat(61));
        let made = SecretCertificate::new("u-1", "shop", "web-tls", content("C", "K"));
        assert_eq!(made.secret, "shop/web-tls");
        assert_eq!(made.name, "ccm-tls-secret-u-1");
        let labels = made.labels("u-1");
        assert_eq!(labels[SECRET_LABEL], "web-tls");
        assert_eq!(labels[DIGEST_LABEL], made.digest);
        assert_eq!(labels[SERVICE_UID_LABEL], "u-1");
    }
}
