//! `kubernetes.io/tls` Secrets a load balancer is made from (a certificate a provider uploads):
//! the reader handed to the provider ([`TlsSecrets`]), its implementation over the apiserver
//! ([`ApiTlsSecrets`]), and what the service controller's Secret watch keeps of a Secret
//! ([`strip`]: its metadata only, never its content).
//!
//! The service controller watches the TLS Secrets (by the field selector [`TLS_SECRETS`]) only
//! to queue the Services whose load balancer names one ([`crate::LoadBalancer::secrets_of`])
//! when it changes; the provider reads a Secret's content when it ensures such a Service,
//! through [`TlsSecrets`], so the content is held only while a sync runs.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::provider::{Error, Result};

/// The type of a TLS Secret.
pub const TLS_TYPE: &str = "kubernetes.io/tls";
/// The field selector of the Secret watch: TLS Secrets only.
pub const TLS_SECRETS: &str = "type=kubernetes.io/tls";
/// The key of the PEM certificate (chain) in a TLS Secret.
pub const CERTIFICATE_KEY: &str = "tls.crt";
/// The key of the PEM private key in a TLS Secret.
pub const PRIVATE_KEY_KEY: &str = "tls.key";

/// The content of a `kubernetes.io/tls` Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSecret {
    /// `tls.crt`: the PEM certificate, with its chain.
    pub certificate: String,
    /// `tls.key`: the PEM private key.
    pub private_key: String,
}

impl std::fmt::Debug for TlsSecret {
    // The private key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSecret")
            .field(
                "certificate",
                &format_args!("{} bytes", self.certificate.len()),
            )
            .field("private_key", &"<redacted>")
            .finish()
    }
}

impl TlsSecret {
    /// The content of `secret` (called `namespace/name` in messages), checked: of type
    /// [`TLS_TYPE`] with a non-empty UTF-8 `tls.crt` and `tls.key`. A failure is an invalid
    /// input naming the field.
    pub fn of(secret: &Secret) -> Result<Self> {
        let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        let kind = secret.type_.as_deref().unwrap_or("Opaque");
        if kind != TLS_TYPE {
            return Err(Error::invalid_input(format!(
                "Secret {namespace}/{name}: type is {kind:?}, not {TLS_TYPE:?}"
            )));
        }
        let field = |key: &str| -> Result<String> {
            let bytes = secret
                .data
                .as_ref()
                .and_then(|data| data.get(key))
                .map(|value| value.0.clone())
                .unwrap_or_default();
            if bytes.is_empty() {
                return Err(Error::invalid_input(format!(
                    "Secret {namespace}/{name}: data.{key} is missing or empty"
                )));
            }
            String::from_utf8(bytes).map_err(|_| {
                Error::invalid_input(format!(
                    "Secret {namespace}/{name}: data.{key} is not PEM text"
                ))
            })
        };
        Ok(Self {
            certificate: field(CERTIFICATE_KEY)?,
            private_key: field(PRIVATE_KEY_KEY)?,
        })
    }
}

/// Reads the TLS Secrets a provider builds load balancers from (handed to it with
/// [`crate::LoadBalancer::use_secrets`]).
#[async_trait]
pub trait TlsSecrets: Send + Sync + std::fmt::Debug {
    /// The content of the Secret `name` in `namespace`: `Ok(None)` when it does not exist, an
    /// invalid input naming the field when it is not a usable TLS Secret, a rejection when it
    /// may not be read (RBAC), a transient error when the apiserver did not answer.
    async fn tls_secret(&self, namespace: &str, name: &str) -> Result<Option<TlsSecret>>;
}

/// [`TlsSecrets`] read from the apiserver (one `GET` each).
#[derive(Clone)]
pub struct ApiTlsSecrets(Client);

impl ApiTlsSecrets {
    /// Secrets read through `client`.
    pub fn new(client: Client) -> Self {
        Self(client)
    }
}

impl std::fmt::Debug for ApiTlsSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiTlsSecrets")
    }
}

#[async_trait]
impl TlsSecrets for ApiTlsSecrets {
    async fn tls_secret(&self, namespace: &str, name: &str) -> Result<Option<TlsSecret>> {
        let api: Api<Secret> = Api::namespaced(self.0.clone(), namespace);
        match api.get_opt(name).await {
            Ok(None) => Ok(None),
            Ok(Some(secret)) => TlsSecret::of(&secret).map(Some),
            Err(kube::Error::Api(status)) if status.is_forbidden() => {
                Err(Error::rejected(format!(
                    "reading Secret {namespace}/{name} is forbidden: the controller's role needs get, list and watch on secrets ({})",
                    status.message
                )))
            }
            Err(err) => Err(Error::transient(
                format!("reading Secret {namespace}/{name}"),
                err,
            )),
        }
    }
}

/// What the Secret watch keeps of a Secret: its name, namespace and resource version (the
/// content is dropped as it arrives).
pub fn strip(secret: &mut Secret) {
    let meta = std::mem::take(&mut secret.metadata);
    *secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            uid: meta.uid,
            ..Default::default()
        },
        ..Default::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(kind: &str, data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("web-tls".into()),
                namespace: Some("shop".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            type_: Some(kind.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_tls_secret_is_read_and_every_flaw_names_its_field() {
        let good = secret(TLS_TYPE, &[("tls.crt", b"CERT"), ("tls.key", b"KEY")]);
        let read = TlsSecret::of(&good).unwrap();
        assert_eq!(
            (read.certificate.as_str(), read.private_key.as_str()),
            ("CERT", "KEY")
        );
        assert!(!format!("{read:?}").contains("KEY"), "{read:?}");
        let cases = [
            (
                secret("Opaque", &[("tls.crt", b"C"), ("tls.key", b"K")]),
                "Secret shop/web-tls: type is \"Opaque\", not \"kubernetes.io/tls\"",
            ),
            (
                secret(TLS_TYPE, &[("tls.key", b"K")]),
                "Secret shop/web-tls: data.tls.crt is missing or empty",
            ),
            (
                secret(TLS_TYPE, &[("tls.crt", b"C"), ("tls.key", b"")]),
                "Secret shop/web-tls: data.tls.key is missing or empty",
            ),
            (
                secret(TLS_TYPE, &[("tls.crt", &[0xff, 0xfe]), ("tls.key", b"K")]),
                "Secret shop/web-tls: data.tls.crt is not PEM text",
            ),
        ];
        for (secret, want) in cases {
            let err = TlsSecret::of(&secret).unwrap_err();
            assert!(err.to_string().contains(want), "{err} / {want}");
            assert_eq!(err.category(), crate::Category::User, "{err}");
        }
    }

    #[test]
    fn the_watch_keeps_no_content() {
        let mut kept = secret(TLS_TYPE, &[("tls.crt", b"C"), ("tls.key", b"K")]);
        strip(&mut kept);
        assert_eq!(kept.data, None);
        assert_eq!(kept.type_, None);
        assert_eq!(kept.metadata.name.as_deref(), Some("web-tls"));
        assert_eq!(kept.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("7"));
    }
}
