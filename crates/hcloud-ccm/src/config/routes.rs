//! `--cluster-cidr`, as the route controller reads it.

use std::str::FromStr;

use ipnet::IpNet;

/// Parses `--cluster-cidr` like the route controller: comma-separated without trimming, every
/// entry a CIDR, at most two, and two only when one is IPv4 and the other IPv6.
pub fn parse_cluster_cidrs(value: &str) -> Result<Vec<IpNet>, String> {
    let mut cidrs = Vec::new();
    let mut errors = Vec::new();
    for part in value.split(',') {
        match IpNet::from_str(part) {
            Ok(net) => cidrs.push(net),
            Err(_) => errors.push(format!("{part:?} is not a CIDR")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b] => {
            if matches!(
                (a, b),
                (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
            ) {
                Err(
                    "two CIDRs of the same IP family; a dual-stack value needs one IPv4 and one \
                     IPv6 CIDR"
                        .to_owned(),
                )
            } else {
                Ok(cidrs)
            }
        }
        _ => Err(format!(
            "{} CIDRs given, at most two (one IPv4, one IPv6) allowed",
            cidrs.len()
        )),
    }
}
