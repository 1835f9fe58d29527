//! Small value types of the configuration: secrets, listen addresses, the log format.

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
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert!("logfmt".parse::<LogFormat>().is_err());
    }
}
