//! The rules every outgoing request must pass before a socket opens: the
//! URL (https only, no user info, no IP literal, host and port on the
//! operator's allowlist) and the addresses a name resolves to (public only,
//! unless the operator's private override names the host). Pure: the egress
//! client applies them around its own resolver, so a second lookup cannot
//! rebind a vetted name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `host` or `host:port` from configuration. An entry without a port allows
/// only 443.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    pub fn parse(entry: &str) -> Result<HostPort, String> {
        let entry = entry.trim();
        if entry.starts_with('[') {
            return Err(format!(
                "{entry:?}: IP literals are not allowed; name the host"
            ));
        }
        let (host, port) = match entry.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("{entry:?}: the port is not a number"))?,
            ),
            None => (entry, 443),
        };
        // The URL parser's own host rules, so an entry means exactly what a
        // URL naming it means: IDN names become punycode, and anything a URL
        // would read as an address (`127.1`, `0x7f.1`, `[::1]`) is refused.
        let literal = || format!("{entry:?}: IP literals are not allowed; name the host");
        let host = match url::Host::parse(host) {
            Ok(url::Host::Domain(d)) => {
                canonical_host(&d).ok_or_else(|| format!("{entry:?} is not a host name"))?
            }
            Ok(_) => return Err(literal()),
            Err(_) => return Err(format!("{entry:?} is not a host name")),
        };
        if looks_numeric(&host) {
            return Err(literal());
        }
        Ok(HostPort { host, port })
    }
}

/// Lowercase, without a trailing dot; `None` for an empty or odd name.
fn canonical_host(host: &str) -> Option<String> {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        && !h
            .split('.')
            .any(|label| label.is_empty() || label.len() > 63);
    ok.then_some(h)
}

/// Some resolvers read all-digit names (and dotted decimal with fewer parts)
/// as addresses: such names count as IP literals.
fn looks_numeric(host: &str) -> bool {
    host.parse::<Ipv4Addr>().is_ok() || host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockReason {
    BadUrl,
    NotHttps,
    UserInfo,
    IpLiteral,
    NotAllowed,
    PrivateAddress,
    NoAddress,
}

impl BlockReason {
    /// Every reason, for the documents that list them.
    pub const ALL: [BlockReason; 7] = [
        BlockReason::BadUrl,
        BlockReason::NotHttps,
        BlockReason::UserInfo,
        BlockReason::IpLiteral,
        BlockReason::NotAllowed,
        BlockReason::PrivateAddress,
        BlockReason::NoAddress,
    ];

    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            BlockReason::BadUrl => "bad_url",
            BlockReason::NotHttps => "not_https",
            BlockReason::UserInfo => "user_info",
            BlockReason::IpLiteral => "ip_literal",
            BlockReason::NotAllowed => "not_allowed",
            BlockReason::PrivateAddress => "private_address",
            BlockReason::NoAddress => "no_address",
        }
    }
}

/// Where a request that passed the URL rules goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// The operator's private override names this host and port.
    pub private_ok: bool,
}

pub fn check_url(
    url: &str,
    allowlist: &[HostPort],
    private_override: &[HostPort],
) -> Result<Target, BlockReason> {
    let parsed = url::Url::parse(url).map_err(|_| BlockReason::BadUrl)?;
    if parsed.scheme() != "https" {
        return Err(BlockReason::NotHttps);
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(BlockReason::UserInfo);
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => canonical_host(d).ok_or(BlockReason::BadUrl)?,
        Some(url::Host::Ipv4(_)) | Some(url::Host::Ipv6(_)) => return Err(BlockReason::IpLiteral),
        None => return Err(BlockReason::BadUrl),
    };
    if looks_numeric(&host) {
        return Err(BlockReason::IpLiteral);
    }
    let port = parsed.port_or_known_default().unwrap_or(443);
    let matches = |e: &HostPort| e.host == host && e.port == port;
    if !allowlist.iter().any(matches) {
        return Err(BlockReason::NotAllowed);
    }
    Ok(Target {
        private_ok: private_override.iter().any(matches),
        host,
        port,
    })
}

/// Whether an address is public. Everything else is refused unless the
/// operator's private override names the host: loopback, private,
/// link-local, CGNAT, unique-local, multicast, documentation, benchmarking,
/// reserved, broadcast, unspecified, NAT64, 6to4, Teredo, and the
/// IPv4-mapped and -compatible forms of all of these.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay anycast (deprecated)
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
        || o[0] >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // IPv4-compatible ::a.b.c.d (deprecated) and the unspecified/loopback.
    if s[..6].iter().all(|x| *x == 0) {
        return false;
    }
    // IPv4-translated ::ffff:0:a.b.c.d (SIIT).
    if s[..4].iter().all(|x| *x == 0) && s[4] == 0xffff && s[5] == 0 {
        return false;
    }
    !(ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x3fff && s[1] < 0x1000) // documentation 3fff::/20
        || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64 64:ff9b::/96 and /48
        || s[0] == 0x2002 // 6to4
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0010) // ORCHID 2001:10::/28
        || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0020) // ORCHIDv2 2001:20::/28
        || (s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0) // benchmarking 2001:2::/48
        || s[0] == 0x5f00 // SRv6 SIDs 5f00::/16
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0)) // discard-only
}

/// Vets what a name resolved to: every address must be public, unless the
/// target is on the private override. One bad address blocks them all.
pub fn vet_addresses(target: &Target, addrs: &[IpAddr]) -> Result<(), BlockReason> {
    if addrs.is_empty() {
        return Err(BlockReason::NoAddress);
    }
    if target.private_ok || addrs.iter().all(|a| is_public(*a)) {
        Ok(())
    } else {
        Err(BlockReason::PrivateAddress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> Vec<HostPort> {
        entries
            .iter()
            .map(|e| HostPort::parse(e).unwrap())
            .collect()
    }

    #[test]
    fn urls_are_checked_before_any_lookup() {
        let list = allow(&["hooks.example.com", "alt.example.com:8443"]);
        let ok = check_url("https://hooks.example.com/x?y=1", &list, &[]).unwrap();
        assert_eq!(
            (ok.host.as_str(), ok.port, ok.private_ok),
            ("hooks.example.com", 443, false)
        );
        assert!(
            check_url("https://HOOKS.example.com./x", &list, &[]).is_ok(),
            "canonical host"
        );
        assert!(check_url("https://alt.example.com:8443/", &list, &[]).is_ok());
        for (url, reason) in [
            ("http://hooks.example.com/", BlockReason::NotHttps),
            ("https://user:pw@hooks.example.com/", BlockReason::UserInfo),
            ("https://user@hooks.example.com/", BlockReason::UserInfo),
            ("https://127.0.0.1/", BlockReason::IpLiteral),
            ("https://[::1]/", BlockReason::IpLiteral),
            ("https://[::ffff:10.0.0.1]/", BlockReason::IpLiteral),
            ("https://2130706433/", BlockReason::IpLiteral),
            ("https://0x7f.1/", BlockReason::IpLiteral),
            ("https://evil.example.com/", BlockReason::NotAllowed),
            ("https://hooks.example.com:8443/", BlockReason::NotAllowed),
            ("https://alt.example.com/", BlockReason::NotAllowed),
            ("not a url", BlockReason::BadUrl),
        ] {
            assert_eq!(check_url(url, &list, &[]), Err(reason.clone()), "{url}");
        }
        let private = allow(&["hooks.example.com"]);
        assert!(
            check_url("https://hooks.example.com/", &list, &private)
                .unwrap()
                .private_ok
        );
        assert!(
            !check_url("https://alt.example.com:8443/", &list, &private)
                .unwrap()
                .private_ok
        );
    }

    #[test]
    fn non_public_addresses_are_refused_in_every_form() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.9",
            "198.18.0.1",
            "240.0.0.1",
            "192.0.0.8",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
            "2001::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.1.1",
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "::ffff:0:808:808",
            "192.88.99.1",
            "2001:2::1",
            "2001:20::1",
            "5f00::1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a} must not be public");
        }
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(a.parse().unwrap()), "{a} is public");
        }
    }

    #[test]
    fn allowlist_entries_read_hosts_as_urls_do() {
        assert_eq!(
            HostPort::parse("Hooks.Example.COM.").unwrap(),
            HostPort {
                host: "hooks.example.com".into(),
                port: 443
            }
        );
        assert_eq!(
            HostPort::parse("bücher.example:8443").unwrap(),
            HostPort {
                host: "xn--bcher-kva.example".into(),
                port: 8443
            }
        );
        for entry in [
            "127.1",
            "2130706433",
            "0x7f.1",
            "10.0.0.1:443",
            "[::1]",
            "[::1]:443",
            "1.2.3",
        ] {
            let err = HostPort::parse(entry).unwrap_err();
            assert!(err.contains("IP literals"), "{entry}: {err}");
        }
        for entry in ["", "a..b", "host:port", "bad host", "h:99999"] {
            assert!(HostPort::parse(entry).is_err(), "{entry}");
        }
    }

    #[test]
    fn one_private_answer_blocks_the_whole_name() {
        let t = Target {
            host: "h.example.com".into(),
            port: 443,
            private_ok: false,
        };
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let private: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(vet_addresses(&t, &[public]), Ok(()));
        assert_eq!(
            vet_addresses(&t, &[public, private]),
            Err(BlockReason::PrivateAddress)
        );
        assert_eq!(vet_addresses(&t, &[]), Err(BlockReason::NoAddress));
        let ok = Target {
            private_ok: true,
            ..t
        };
        assert_eq!(
            vet_addresses(&ok, &[private]),
            Ok(()),
            "the operator's override"
        );
        assert!(HostPort::parse("10.0.0.1").is_err());
        assert!(HostPort::parse("host:notaport").is_err());
    }
}
