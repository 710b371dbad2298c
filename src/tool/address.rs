//! The address rule shared by `web_fetch` (`tools::web_fetch`) and the browser's pages
//! (`browser::guard`): only http(s), and only public addresses unless the operator allows private
//! ones — a literal IP host checked as is, a host name by every address it resolves to.
//!
//! Invariant: one rule, here; a caller that connects itself (`web_fetch`'s resolver) connects to
//! exactly the addresses [`resolve_checked`] returned.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use url::Url;

use crate::secrets::redact;
use crate::tool::ToolSettings;

/// Redirects `web_fetch` follows before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// Which destinations may be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Public unicast addresses only (the default).
    PublicOnly,
    /// Anything, including loopback and private networks (`web_fetch_allow_private`).
    AllowPrivate,
}

impl AddressPolicy {
    pub fn from_settings(settings: &ToolSettings) -> AddressPolicy {
        if settings.web_fetch_allow_private {
            AddressPolicy::AllowPrivate
        } else {
            AddressPolicy::PublicOnly
        }
    }
}

/// Why a destination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchRefusal {
    #[error("`{url}` is not a valid URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("the scheme `{scheme}:` is not allowed; web_fetch fetches http and https URLs only")]
    Scheme { scheme: String },
    #[error("the URL has no host")]
    NoHost,
    #[error(
        "{host} is {kind} address ({address}); web_fetch only reaches public addresses \
         (the operator can allow private ones with web_fetch_allow_private)"
    )]
    ForbiddenAddress {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    #[error("{host} does not resolve to any address")]
    NoAddress { host: String },
    #[error("too many redirects (more than {MAX_REDIRECTS}); the last one pointed to {url}")]
    TooManyRedirects { url: String },
    #[error(
        "the URL carries a secret of this daemon (a bot token or API key, possibly encoded); \
         web_fetch never sends one, so nothing was fetched"
    )]
    CarriesSecret,
}

/// What kind of non-public address `ip` is, as "a loopback", "a private", ...; `None` when it is
/// public. IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged by that address.
pub fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                return Some("a loopback");
            }
            if v6.is_unspecified() {
                return Some("an unspecified");
            }
            if let Some(v4) = v6.to_ipv4_mapped() {
                return non_public_v4(v4);
            }
            let segments = v6.segments();
            let embedded_v4 = |high: u16, low: u16| {
                Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8)
            };
            match segments {
                [first, ..] if first & 0xfe00 == 0xfc00 => Some("a private (unique local)"),
                [first, ..] if first & 0xffc0 == 0xfe80 => Some("a link-local"),
                [first, ..] if first & 0xffc0 == 0xfec0 => Some("a site-local"),
                [first, ..] if first & 0xff00 == 0xff00 => Some("a multicast"),
                // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address.
                [0x64, 0xff9b, 0, 0, 0, 0, high, low] => non_public_v4(embedded_v4(high, low)),
                // 6to4 (2002::/16) reaches the IPv4 address in the next 32 bits.
                [0x2002, high, low, ..] => non_public_v4(embedded_v4(high, low)),
                // IPv4-compatible (::a.b.c.d, deprecated) and other ::/96 forms.
                [0, 0, 0, 0, 0, 0, _, _] => Some("a reserved (IPv4-compatible)"),
                [0x2001, 0x0db8, ..] => Some("a documentation"),
                [0x0100, 0, 0, 0, ..] => Some("a discard-only"),
                _ => None,
            }
        }
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (127, _, _) => Some("a loopback"),
        (10, _, _) => Some("a private"),
        (172, 16..=31, _) => Some("a private"),
        (192, 168, _) => Some("a private"),
        (169, 254, _) => Some("a link-local (cloud metadata service range)"),
        (100, 64..=127, _) => Some("a shared (carrier-grade NAT)"),
        (0, _, _) => Some("an unspecified"),
        (224..=239, _, _) => Some("a multicast"),
        (240..=255, _, _) => Some("a reserved"),
        (192, 0, 0) => Some("a reserved (IETF protocol)"),
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Some("a documentation"),
        (198, 18..=19, _) => Some("a benchmarking"),
        _ => None,
    }
}

/// Checks what can be checked without DNS: the scheme, and the host when it is an IP literal.
/// Applied to the first URL and to every redirect target; host names are checked by
/// [`VettingResolver`] when the connection is made.
pub fn check_url(url: &Url, policy: AddressPolicy) -> Result<(), FetchRefusal> {
    if crate::secrets::contains_secret(url.as_str()) {
        return Err(FetchRefusal::CarriesSecret);
    }
    check_scheme_and_literal(url, policy).map(|_| ())
}

/// The scheme and an IP-literal host checked; the host name left to resolve, if it is one.
fn check_scheme_and_literal(
    url: &Url,
    policy: AddressPolicy,
) -> Result<Option<&str>, FetchRefusal> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchRefusal::Scheme {
            scheme: url.scheme().to_string(),
        });
    }
    let address = match url.host() {
        None => return Err(FetchRefusal::NoHost),
        Some(url::Host::Domain(name)) => return Ok(Some(name)),
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    check_address(url.host_str().unwrap_or_default(), address, policy).map(|()| None)
}

/// The whole address rule for a destination someone else connects to (the browser's pages):
/// the scheme, then the host — an IP literal, or every address its name resolves to — must be
/// public unless `policy` allows private ones. Unlike [`check_url`] it does not look for
/// secrets (a page may send its own login to its own site).
pub async fn check_destination(url: &Url, policy: AddressPolicy) -> Result<(), FetchRefusal> {
    let Some(name) = check_scheme_and_literal(url, policy)? else {
        return Ok(());
    };
    match resolve_checked(name, policy).await {
        Ok(_) => Ok(()),
        Err(error) => Err(match error.downcast::<FetchRefusal>() {
            Ok(refusal) => *refusal,
            Err(_) => FetchRefusal::NoAddress {
                host: name.to_string(),
            },
        }),
    }
}

/// Resolves `host` with the system resolver and checks every address (any non-public one
/// refuses the name, unless allowed): the rule both [`VettingResolver`] and
/// [`check_destination`] apply. A refusal is boxed as the [`FetchRefusal`] itself (so callers
/// can downcast it); a resolver failure as its own error.
pub async fn resolve_checked(
    host: &str,
    policy: AddressPolicy,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    if addresses.is_empty() {
        return Err(Box::new(FetchRefusal::NoAddress {
            host: host.to_string(),
        }));
    }
    for address in &addresses {
        check_address(host, address.ip(), policy)?;
    }
    Ok(addresses)
}

pub fn check_address(
    host: &str,
    address: IpAddr,
    policy: AddressPolicy,
) -> Result<(), FetchRefusal> {
    if policy == AddressPolicy::AllowPrivate {
        return Ok(());
    }
    match non_public_kind(address) {
        Some(kind) => Err(FetchRefusal::ForbiddenAddress {
            host: host.to_string(),
            address,
            kind,
        }),
        None => Ok(()),
    }
}

/// Parses `text` as a URL to fetch and checks it.
pub fn parse_and_check_url(text: &str, policy: AddressPolicy) -> Result<Url, FetchRefusal> {
    // The text as given too: parsing lowercases the host (`<KEY>.example.com`).
    if crate::secrets::contains_secret(text) {
        return Err(FetchRefusal::CarriesSecret);
    }
    let url = Url::parse(text.trim()).map_err(|error| FetchRefusal::InvalidUrl {
        url: redact(text).into_owned(),
        reason: error.to_string(),
    })?;
    check_url(&url, policy)?;
    Ok(url)
}

/// Whether a `[browser] allow_private` entry (`host` or `host:port`) names `url`'s host (and
/// port): such a private host is reachable although the policy is public-only.
pub fn allowed_private_entry(url: &url::Url, entries: &[String]) -> bool {
    let host = url.host_str().unwrap_or_default();
    allowed_private_host(host, url.port_or_known_default(), entries)
}

/// [`allowed_private_entry`] for a host (a name, an IPv4 address, or an IPv6 address with or
/// without its brackets) and port.
pub fn allowed_private_host(host: &str, port: Option<u16>, entries: &[String]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let same_host = |entry_host: &str| {
        let entry_host = entry_host.trim_start_matches('[').trim_end_matches(']');
        !entry_host.is_empty() && entry_host == bare
    };
    entries.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        match entry.rsplit_once(':') {
            // `host:port`, `[v6]:port`; a bare IPv6 address has colons but no port.
            Some((entry_host, entry_port))
                if !entry_host.ends_with(':')
                    && (!entry_host.contains(':') || entry_host.ends_with(']')) =>
            {
                match entry_port.parse::<u16>() {
                    Ok(entry_port) => same_host(entry_host) && Some(entry_port) == port,
                    Err(_) => same_host(&entry),
                }
            }
            _ => same_host(&entry),
        }
    })
}

/// Resolves `host` ONCE and checks every address it resolves to (or the IP literal itself),
/// like [`check_destination`], a `[browser] allow_private` entry for `host` (and `port`)
/// allowing private ones: the addresses returned, with `port`, are the only ones the caller may
/// connect to (pinned — a second lookup could answer differently, DNS rebinding).
pub async fn resolve_pinned(
    host: &str,
    port: u16,
    policy: AddressPolicy,
    allow_private: &[String],
) -> Result<Vec<SocketAddr>, FetchRefusal> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.is_empty() {
        return Err(FetchRefusal::NoHost);
    }
    let policy = if allowed_private_host(host, Some(port), allow_private) {
        AddressPolicy::AllowPrivate
    } else {
        policy
    };
    if let Ok(address) = bare.parse::<IpAddr>() {
        check_address(bare, address, policy)?;
        return Ok(vec![SocketAddr::new(address, port)]);
    }
    let name = bare.trim_end_matches('.');
    match resolve_checked(name, policy).await {
        Ok(addresses) => Ok(addresses
            .into_iter()
            .map(|address| SocketAddr::new(address.ip(), port))
            .collect()),
        Err(error) => Err(match error.downcast::<FetchRefusal>() {
            Ok(refusal) => *refusal,
            Err(_) => FetchRefusal::NoAddress {
                host: name.to_string(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_names_a_host_or_a_host_and_port() {
        let url = url::Url::parse("http://192.168.1.10:8123/x").expect("a URL");
        assert!(allowed_private_entry(&url, &["192.168.1.10:8123".into()]));
        assert!(allowed_private_entry(&url, &["192.168.1.10".into()]));
        assert!(!allowed_private_entry(&url, &["192.168.1.10:80".into()]));
        assert!(!allowed_private_entry(&url, &["192.168.1.1".into()]));
        let plain = url::Url::parse("http://nas.local/").expect("a URL");
        assert!(allowed_private_entry(&plain, &["NAS.local:80".into()]));
        assert!(allowed_private_host(
            "[::1]",
            Some(8080),
            &["[::1]:8080".into()]
        ));
        assert!(allowed_private_host("::1", Some(8080), &["::1".into()]));
        assert!(!allowed_private_host(
            "::1",
            Some(8080),
            &["[::1]:80".into()]
        ));
    }

    #[tokio::test]
    async fn a_pinned_destination_is_checked_where_it_connects() {
        let policy = AddressPolicy::PublicOnly;
        let refused = resolve_pinned("localhost", 8080, policy, &[]).await;
        assert!(
            matches!(refused, Err(FetchRefusal::ForbiddenAddress { .. })),
            "{refused:?}"
        );
        let allowed = resolve_pinned("127.0.0.1", 8080, policy, &["127.0.0.1:8080".into()])
            .await
            .expect("an allowed entry");
        assert_eq!(allowed, vec!["127.0.0.1:8080".parse().expect("an address")]);
        let other_port =
            resolve_pinned("127.0.0.1", 8081, policy, &["127.0.0.1:8080".into()]).await;
        assert!(other_port.is_err(), "{other_port:?}");
        let literal = resolve_pinned("[::1]", 443, policy, &[]).await;
        assert!(literal.is_err(), "{literal:?}");
    }
}
