//! TLS certificates for load balancers.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::action::{Action, ActionErrorInfo};
use super::common::{Labels, ResourceRef, null_default};
use crate::macros::string_enum;

string_enum! {
    /// Type of a certificate.
    pub enum CertificateType {
        Uploaded = "uploaded",
        Managed = "managed",
    }
}

string_enum! {
    /// Issuance state of a managed certificate.
    pub enum IssuanceStatus {
        Pending = "pending",
        Completed = "completed",
        Failed = "failed",
    }
}

string_enum! {
    /// Renewal state of a managed certificate.
    pub enum RenewalStatus {
        Scheduled = "scheduled",
        Pending = "pending",
        Failed = "failed",
        Unavailable = "unavailable",
    }
}

/// A certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// ID of the certificate.
    pub id: i64,
    /// Name, unique per project.
    pub name: String,
    /// User-defined labels.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: Labels,
    /// Type (older API versions omit it; it then counts as uploaded).
    #[serde(rename = "type", default)]
    pub kind: Option<CertificateType>,
    /// PEM certificate (chain); `None` for a managed certificate not issued yet.
    #[serde(default)]
    pub certificate: Option<String>,
    /// Point in time the certificate was created.
    #[serde(default)]
    pub created: DateTime<Utc>,
    /// Start of validity.
    #[serde(default)]
    pub not_valid_before: Option<DateTime<Utc>>,
    /// End of validity.
    #[serde(default)]
    pub not_valid_after: Option<DateTime<Utc>>,
    /// Domains covered.
    #[serde(default, deserialize_with = "null_default")]
    pub domain_names: Vec<String>,
    /// SHA-256 fingerprint.
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// Issuance state (managed certificates only).
    #[serde(default)]
    pub status: Option<CertificateStatus>,
    /// Resources using the certificate.
    #[serde(default, deserialize_with = "null_default")]
    pub used_by: Vec<ResourceRef>,
}

/// Issuance state of a managed certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateStatus {
    /// Issuance.
    #[serde(default)]
    pub issuance: Option<IssuanceStatus>,
    /// Renewal.
    #[serde(default)]
    pub renewal: Option<RenewalStatus>,
    /// Why issuance or renewal failed.
    #[serde(default)]
    pub error: Option<ActionErrorInfo>,
}

/// Body of `POST /certificates`. Its `Debug` output never shows the private key.
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateCertificateRequest {
    /// Name of the certificate.
    pub name: String,
    /// Type; `None` means uploaded.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<CertificateType>,
    /// PEM certificate (uploaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// PEM private key (uploaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// Domains (managed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain_names: Option<Vec<String>>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

impl CreateCertificateRequest {
    /// An uploaded certificate from PEM certificate and key.
    pub fn uploaded(
        name: impl Into<String>,
        certificate: impl Into<String>,
        private_key: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            kind: Some(CertificateType::Uploaded),
            certificate: Some(certificate.into()),
            private_key: Some(private_key.into()),
            ..Self::default()
        }
    }

    /// A managed (Let's Encrypt) certificate for the given domains.
    pub fn managed(name: impl Into<String>, domain_names: Vec<String>) -> Self {
        Self {
            name: name.into(),
            kind: Some(CertificateType::Managed),
            domain_names: Some(domain_names),
            ..Self::default()
        }
    }

    /// Sets the labels.
    pub fn with_labels(mut self, labels: Labels) -> Self {
        self.labels = Some(labels);
        self
    }
}

impl fmt::Debug for CreateCertificateRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateCertificateRequest")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("certificate", &self.certificate.as_ref().map(|_| "<pem>"))
            .field(
                "private_key",
                &self.private_key.as_ref().map(|_| "<redacted>"),
            )
            .field("domain_names", &self.domain_names)
            .field("labels", &self.labels)
            .finish()
    }
}

/// Answer of `POST /certificates`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CreateCertificateResponse {
    /// The new certificate.
    pub certificate: Certificate,
    /// The issuance action (managed certificates); `None` for uploaded ones.
    #[serde(default)]
    pub action: Option<Action>,
}
