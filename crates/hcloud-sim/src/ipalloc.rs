//! Pure IP allocation helpers.
//!
//! Public addresses come from documentation / benchmarking ranges so they can never collide
//! with real hosts: servers get IPv4 from 192.0.2.0/24 and then 198.18.0.0/15, load balancers
//! from 198.51.100.0/24 and then 198.19.128.0/17; 203.0.113.0/24 is left for IP targets
//! (.101 up are the Robot servers' main addresses, the rest stays free).
//! IPv6 networks are /64s out of 2001:db8::/32.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// The n-th (0-based) address of a pool: `.1` to `.254` of the /24 `first`, then upwards from
/// `then` up to `last`; `None` when the pool is used up.
fn nth_of_pool(n: u32, first: [u8; 3], then: Ipv4Addr, last: Ipv4Addr) -> Option<Ipv4Addr> {
    if n < 254 {
        return Some(Ipv4Addr::new(first[0], first[1], first[2], (n + 1) as u8));
    }
    let ip = u32::from(then).checked_add(n - 254)?;
    (ip <= u32::from(last)).then(|| Ipv4Addr::from(ip))
}

/// The n-th (0-based) public IPv4 address handed to a server: 192.0.2.1 ..= 192.0.2.254
/// first, then 198.18.0.1 ..= 198.19.127.254 (the first half of the benchmarking range).
pub fn server_ipv4(n: u32) -> Option<Ipv4Addr> {
    nth_of_pool(
        n,
        [192, 0, 2],
        Ipv4Addr::new(198, 18, 0, 1),
        Ipv4Addr::new(198, 19, 127, 254),
    )
}

/// The n-th (0-based) public IPv4 address handed to a load balancer: 198.51.100.1 ..=
/// 198.51.100.254 first, then 198.19.128.1 ..= 198.19.255.254.
pub fn load_balancer_ipv4(n: u32) -> Option<Ipv4Addr> {
    nth_of_pool(
        n,
        [198, 51, 100],
        Ipv4Addr::new(198, 19, 128, 1),
        Ipv4Addr::new(198, 19, 255, 254),
    )
}

/// The n-th (0-based) IPv6 /64 handed to a server: `2001:db8:0:<n+1>::/64` and upwards.
pub fn server_ipv6_net(n: u32) -> Ipv6Net {
    let n = u64::from(n) + 1;
    let hi = (0x2001_0db8u128 << 96) | (u128::from(n) << 64);
    // Prefix 64 is always valid.
    Ipv6Net::new(Ipv6Addr::from(hi), 64).unwrap_or_default()
}

/// The n-th (0-based) IPv4 address handed to a Robot dedicated server: 203.0.113.101 up to
/// 203.0.113.254 (the lower part of that range stays free for hand-written IP targets).
pub fn robot_ipv4(n: u32) -> Option<Ipv4Addr> {
    (n < 154).then(|| Ipv4Addr::new(203, 0, 113, (n + 101) as u8))
}

/// The n-th (0-based) IPv6 network of a Robot dedicated server, written as Robot writes it:
/// `2001:db8:ffee:<n+1>::`.
pub fn robot_ipv6_net(n: u32) -> String {
    let n = u128::from(n % 0xffff) + 1;
    Ipv6Addr::from((0x2001_0db8_ffeeu128 << 80) | (n << 64)).to_string()
}

/// The n-th (0-based) IPv6 address of a load balancer: `2001:db8:ffff:<n+1>::1`.
pub fn load_balancer_ipv6(n: u32) -> Ipv6Addr {
    let n = u128::from(n) + 1;
    Ipv6Addr::from((0x2001_0db8_ffffu128 << 80) | (n << 64) | 1)
}

/// The gateway of a network: its first host address (e.g. 10.0.0.1 for 10.0.0.0/16).
pub fn network_gateway(range: Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()).saturating_add(1))
}

/// Reserved address that can never be assigned nor used as a route gateway.
pub const RESERVED_GATEWAY: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);

/// Whether `ip` may be assigned to a server or load balancer inside `subnet`.
pub fn assignable(subnet: Ipv4Net, gateway: Ipv4Addr, ip: Ipv4Addr) -> bool {
    subnet.contains(&ip)
        && ip != subnet.network()
        && ip != subnet.broadcast()
        && ip != gateway
        && ip != RESERVED_GATEWAY
}

/// Lowest free assignable address in `subnet`.
pub fn allocate_private_ip(
    subnet: Ipv4Net,
    gateway: Ipv4Addr,
    used: &HashSet<Ipv4Addr>,
) -> Option<Ipv4Addr> {
    let start = u32::from(subnet.network());
    let end = u32::from(subnet.broadcast());
    (start..=end)
        .map(Ipv4Addr::from)
        .find(|ip| assignable(subnet, gateway, *ip) && !used.contains(ip))
}

/// First `/prefix` inside `range` that overlaps none of `taken`.
pub fn first_free_subnet(range: Ipv4Net, prefix: u8, taken: &[Ipv4Net]) -> Option<Ipv4Net> {
    range
        .subnets(prefix)
        .ok()?
        .find(|candidate| !taken.iter().any(|t| overlaps(*candidate, *t)))
}

/// Whether two IPv4 networks share any address.
pub fn overlaps(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Whether `net` lies inside the private (RFC 1918) address space.
pub fn is_rfc1918(net: Ipv4Net) -> bool {
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .iter()
        .filter_map(|s| s.parse::<Ipv4Net>().ok())
        .any(|p| p.contains(&net))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn robot_addresses() {
        assert_eq!(robot_ipv4(0), Some(Ipv4Addr::new(203, 0, 113, 101)));
        assert_eq!(robot_ipv4(153), Some(Ipv4Addr::new(203, 0, 113, 254)));
        assert_eq!(robot_ipv4(154), None);
        assert_eq!(robot_ipv6_net(0), "2001:db8:ffee:1::");
        assert_eq!(robot_ipv6_net(9), "2001:db8:ffee:a::");
    }

    #[test]
    fn public_ipv4_sequences() {
        assert_eq!(server_ipv4(0), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(server_ipv4(253), Some(Ipv4Addr::new(192, 0, 2, 254)));
        assert_eq!(server_ipv4(254), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(load_balancer_ipv4(0), Some(Ipv4Addr::new(198, 51, 100, 1)));
        assert_eq!(
            load_balancer_ipv4(254),
            Some(Ipv4Addr::new(198, 19, 128, 1))
        );
        assert_eq!(server_ipv4(u32::MAX), None);
    }

    #[test]
    fn ipv6_sequences() {
        assert_eq!(server_ipv6_net(0).to_string(), "2001:db8:0:1::/64");
        assert_eq!(server_ipv6_net(1).to_string(), "2001:db8:0:2::/64");
        assert_eq!(load_balancer_ipv6(0).to_string(), "2001:db8:ffff:1::1");
    }

    #[test]
    fn private_allocation_skips_reserved_and_used() {
        let range = net("10.0.0.0/16");
        let gw = network_gateway(range);
        assert_eq!(gw, Ipv4Addr::new(10, 0, 0, 1));
        let sub = net("10.0.0.0/24");
        let mut used = HashSet::new();
        assert_eq!(
            allocate_private_ip(sub, gw, &used),
            Some(Ipv4Addr::new(10, 0, 0, 2))
        );
        used.insert(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(
            allocate_private_ip(sub, gw, &used),
            Some(Ipv4Addr::new(10, 0, 0, 3))
        );
        let other = net("10.0.1.0/24");
        assert_eq!(
            allocate_private_ip(other, gw, &used),
            Some(Ipv4Addr::new(10, 0, 1, 1))
        );
        let tiny = net("10.0.2.0/30");
        used.insert(Ipv4Addr::new(10, 0, 2, 1));
        assert_eq!(
            allocate_private_ip(tiny, gw, &used),
            Some(Ipv4Addr::new(10, 0, 2, 2))
        );
        used.insert(Ipv4Addr::new(10, 0, 2, 2));
        assert_eq!(allocate_private_ip(tiny, gw, &used), None);
    }

    #[test]
    fn subnets_and_overlap() {
        let range = net("10.0.0.0/16");
        let taken = vec![net("10.0.0.0/24"), net("10.0.2.0/23")];
        assert_eq!(
            first_free_subnet(range, 24, &taken),
            Some(net("10.0.1.0/24"))
        );
        assert!(overlaps(net("10.0.0.0/16"), net("10.0.5.0/24")));
        assert!(!overlaps(net("10.0.0.0/24"), net("10.0.1.0/24")));
        assert!(is_rfc1918(net("10.244.0.0/16")));
        assert!(is_rfc1918(net("172.20.0.0/16")));
        assert!(!is_rfc1918(net("8.8.8.0/24")));
        assert!(!is_rfc1918(net("0.0.0.0/0")));
    }
}
