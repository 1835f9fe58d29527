//! Small value types of the configuration: secrets, listen addresses, enumerations, Go booleans.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A secret string (API token, password). `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret value, for handing to the client that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A Go-style listen address: `host:port` where the host may be empty (every interface), an IP
/// (IPv6 in brackets) or a name resolved at bind time. Examples: `:8233`, `127.0.0.1:8233`,
/// `[::1]:8233`, `localhost:8233`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListenAddress {
    /// `None` = every interface.
    pub host: Option<String>,
    /// TCP port (0 = pick a free one).
    pub port: u16,
}

impl ListenAddress {
    /// Every interface on `port`.
    pub fn any(port: u16) -> Self {
        ListenAddress { host: None, port }
    }

    /// The host as an IP address, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.as_deref().and_then(|h| h.parse().ok())
    }
}

impl FromStr for ListenAddress {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| format!("{value:?} is not of the form [host]:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{value:?}: port {port:?} is not a number between 0 and 65535"))?;
        let host = if let Some(inner) = host.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| format!("{value:?}: unbalanced '[' in host"))?;
            if inner.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("{value:?}: {inner:?} is not an IPv6 address"));
            }
            Some(inner.to_owned())
        } else if host.is_empty() {
            None
        } else if host.contains(':') {
            return Err(format!(
                "{value:?}: IPv6 addresses must be written in brackets"
            ));
        } else {
            Some(host.to_owned())
        };
        Ok(ListenAddress { host, port })
    }
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            None => write!(f, ":{}", self.port),
            Some(h) if h.contains(':') => write!(f, "[{h}]:{}", self.port),
            Some(h) => write!(f, "{h}:{}", self.port),
        }
    }
}

// Deliberate repetition: each enumeration below is the value set of one setting, with a
// `FromStr` that spells out the exact words that setting accepts (some case-sensitive as
// upstream, the algorithm not) and an error listing them.

/// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddressFamily {
    /// IPv4 addresses only (default).
    #[default]
    Ipv4,
    /// IPv6 addresses only.
    Ipv6,
    /// Both families.
    DualStack,
}

impl FromStr for AddressFamily {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "ipv4" => Ok(AddressFamily::Ipv4),
            "ipv6" => Ok(AddressFamily::Ipv6),
            "dualstack" => Ok(AddressFamily::DualStack),
            other => Err(format!(
                "invalid value {other:?}, expected one of: ipv4, ipv6, dualstack"
            )),
        }
    }
}

/// `HCLOUD_SERVER_CACHE_MODE` (experimental upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerCacheMode {
    /// Cache the list of all servers (default).
    #[default]
    All,
    /// Cache servers one by one.
    One,
    /// No cache.
    Off,
}

impl FromStr for ServerCacheMode {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "all" => Ok(ServerCacheMode::All),
            "one" => Ok(ServerCacheMode::One),
            "off" => Ok(ServerCacheMode::Off),
            other => Err(format!(
                "invalid value {other:?}, expected one of: all, one, off"
            )),
        }
    }
}

/// `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadBalancerAlgorithm {
    /// Round robin (the API's default).
    #[default]
    RoundRobin,
    /// Least connections.
    LeastConnections,
}

impl FromStr for LoadBalancerAlgorithm {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "round_robin" => Ok(LoadBalancerAlgorithm::RoundRobin),
            "least_connections" => Ok(LoadBalancerAlgorithm::LeastConnections),
            _ => Err(format!(
                "unsupported value {value:?}, expected round_robin or least_connections"
            )),
        }
    }
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("invalid value {other:?}, expected text or json")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_is_redacted() {
        let s = Secret::new("abc123");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(s.to_string(), "<redacted>");
        assert_eq!(s.expose(), "abc123");
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(":8233".parse(), Ok(ListenAddress::any(8233)));
        let a: ListenAddress = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(a.ip(), Some("127.0.0.1".parse().unwrap()));
        let a: ListenAddress = "[::1]:9000".parse().unwrap();
        assert_eq!(a.host.as_deref(), Some("::1"));
        assert_eq!(a.to_string(), "[::1]:9000");
        let a: ListenAddress = "localhost:1".parse().unwrap();
        assert_eq!(a.host.as_deref(), Some("localhost"));
        assert!("8233".parse::<ListenAddress>().is_err());
        assert!(":http".parse::<ListenAddress>().is_err());
        assert!(":70000".parse::<ListenAddress>().is_err());
        assert!("::1:80".parse::<ListenAddress>().is_err());
        assert!("[zz]:80".parse::<ListenAddress>().is_err());
    }

    #[test]
    fn enumerations() {
        assert_eq!("dualstack".parse(), Ok(AddressFamily::DualStack));
        assert!("IPv4".parse::<AddressFamily>().is_err());
        assert_eq!(
            " Least_Connections ".parse(),
            Ok(LoadBalancerAlgorithm::LeastConnections)
        );
        assert_eq!("off".parse(), Ok(ServerCacheMode::Off));
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert!("logfmt".parse::<LogFormat>().is_err());
    }
}
