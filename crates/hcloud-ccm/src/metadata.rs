//! The attached-network check (`HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=false`, the default): at
//! startup the Hetzner metadata service of the host the CCM runs on is asked for its private
//! networks, and the start fails unless `HCLOUD_NETWORK` is among them. This guards against a
//! CCM that cannot reach the nodes' private addresses, as the official CCM does.
//!
//! A service that does not answer (or answers 5xx, 408, 429) may come back and is asked again
//! ([`MetadataError::is_definite`] false); one that answers but refuses (403, 404, any other
//! 4xx: not a Hetzner Cloud server, or a wrong `HCLOUD_METADATA_ENDPOINT`) will not change by
//! waiting, and neither will a list without the network.

use std::time::Duration;

/// How long the metadata service may take to answer (hcloud-go's default).
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the check failed.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The metadata service could not be asked or did not answer in time.
    #[error(
        "HCLOUD_NETWORK: cannot check that this server is attached to network {network} through \
         the metadata service at {url}: {message}. Run the CCM on a Hetzner Cloud server, or set \
         HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true"
    )]
    Unreachable {
        /// What was asked.
        url: String,
        /// The network (as configured).
        network: String,
        /// What went wrong.
        message: String,
    },
    /// The service answered, but refused (a 4xx other than 408 and 429): this is not a Hetzner
    /// Cloud server, or `HCLOUD_METADATA_ENDPOINT` names something else.
    #[error(
        "HCLOUD_NETWORK: the attached-network check for network {network} cannot pass: the \
         metadata service at {url} (HCLOUD_METADATA_ENDPOINT) refused to list this server's \
         private networks (HTTP {status}: {body}). The CCM does not run on a Hetzner Cloud \
         server, or HCLOUD_METADATA_ENDPOINT is wrong; off Hetzner Cloud (a laptop, CI, another \
         provider), set HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true"
    )]
    Refused {
        /// What was asked.
        url: String,
        /// The network (as configured).
        network: String,
        /// The HTTP status of the answer.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The server is not attached to the network.
    #[error(
        "HCLOUD_NETWORK: this server is not attached to network {network} (ID {network_id}) \
         according to the metadata service at {url}; attach it, or set \
         HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true"
    )]
    NotAttached {
        /// What was asked.
        url: String,
        /// The network (as configured).
        network: String,
        /// Its ID.
        network_id: i64,
    },
}

impl MetadataError {
    /// Whether asking again cannot help: the service refused, or does not list the network.
    /// A service that did not answer, or answered 5xx, 408 or 429, may pass by itself.
    pub fn is_definite(&self) -> bool {
        match self {
            Self::Unreachable { .. } => false,
            Self::Refused { .. } | Self::NotAttached { .. } => true,
        }
    }
}

/// Whether an HTTP status of the metadata service is a refusal that waiting will not change:
/// a 4xx, except 408 (request timeout) and 429 (too many requests).
pub fn is_refusal(status: u16) -> bool {
    (400..500).contains(&status) && !matches!(status, 408 | 429)
}

/// Whether a `/private-networks` answer lists the network: it is YAML, one entry per network
/// with a `network_id: <id>` line (the same test as the official CCM).
pub fn private_networks_contain(body: &str, network_id: i64) -> bool {
    let needle = format!("network_id: {network_id}");
    body.lines().any(|line| {
        line.trim_start_matches(|c: char| c == '-' || c.is_whitespace())
            .trim_end()
            == needle
    })
}

/// Asks `<endpoint>/private-networks` whether this server is attached to `network_id`
/// (`network` is the configured name or ID, for messages).
pub async fn check_attached(
    endpoint: &str,
    network: &str,
    network_id: i64,
) -> Result<(), MetadataError> {
    let url = format!("{}/private-networks", endpoint.trim_end_matches('/'));
    let unreachable = |message: String| MetadataError::Unreachable {
        url: url.clone(),
        network: network.to_owned(),
        message,
    };
    let client = reqwest::Client::builder()
        .timeout(METADATA_TIMEOUT)
        .connect_timeout(METADATA_TIMEOUT)
        .build()
        .map_err(|e| unreachable(e.to_string()))?;
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| unreachable(error_text(&e)))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| unreachable(error_text(&e)))?;
    if !status.is_success() {
        let body = body.trim().chars().take(200).collect::<String>();
        if is_refusal(status.as_u16()) {
            return Err(MetadataError::Refused {
                url,
                network: network.to_owned(),
                status: status.as_u16(),
                // One line, even when the answer is a page.
                body: body.split_whitespace().collect::<Vec<_>>().join(" "),
            });
        }
        return Err(unreachable(format!("HTTP {status}: {body}")));
    }
    if private_networks_contain(&body, network_id) {
        tracing::info!(
            network,
            network_id,
            "this server is attached to the network"
        );
        Ok(())
    } else {
        Err(MetadataError::NotAttached {
            url,
            network: network.to_owned(),
            network_id,
        })
    }
}

fn error_text(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return format!("no answer within {} s", METADATA_TIMEOUT.as_secs());
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "- ip: 10.0.0.2\n  alias_ips: []\n  interface_num: 1\n  \
                        mac_address: 86:00:00:2a:7d:e0\n  network_id: 1234\n  \
                        network_name: nw-test1\n  network: 10.0.0.0/8\n  subnet: 10.0.0.0/24\n  \
                        gateway: 10.0.0.1\n- ip: 192.168.0.2\n  network_id: 4321\n";

    #[test]
    fn the_network_id_must_be_listed_exactly() {
        let cases = [
            (BODY, 1234, true),
            (BODY, 4321, true),
            (BODY, 123, false),
            (BODY, 12345, false),
            ("", 1234, false),
            ("- network_id: 77\n", 77, true),
            ("network_id: 77", 77, true),
            ("  network_name: network_id: 77x\n", 77, false),
        ];
        for (body, id, expected) in cases {
            assert_eq!(
                private_networks_contain(body, id),
                expected,
                "{id} in {body:?}"
            );
        }
    }

    #[test]
    fn client_errors_are_refusals_but_timeouts_limits_and_server_errors_are_not() {
        for status in [400, 401, 403, 404, 405, 410] {
            assert!(is_refusal(status), "{status}");
        }
        for status in [200, 301, 408, 429, 500, 502, 503, 504] {
            assert!(!is_refusal(status), "{status}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_service_is_a_clear_error() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Nothing listens on port 9 of the loopback address.
        let err = check_attached("http://127.0.0.1:9/hetzner/v1/metadata", "net", 1)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, MetadataError::Unreachable { .. }), "{text}");
        assert!(!err.is_definite());
        assert!(
            text.contains("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK") && text.contains("127.0.0.1:9"),
            "{text}"
        );
    }
}
