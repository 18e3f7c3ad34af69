//! An `http://` or `https://` URL taken apart for a request: the host to
//! connect to, its port, the `Host` header's authority, the path and
//! query. Nothing else is spoken: no user info, no fragment.

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// The host, without an IPv6 address's brackets.
    pub host: String,
    pub port: u16,
    /// `host[:port]` as written, for the `Host` header.
    pub authority: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// `https://`: the exchange goes over TLS, the server verified.
    pub https: bool,
}

impl Url {
    /// Takes `url` apart; the error says what is wrong with it.
    pub fn parse(url: &str) -> Result<Url, String> {
        let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err("must start with http:// or https://".into()),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if path.starts_with('?') || path.contains('#') {
            return Err("has a query without a path, or a #fragment".into());
        }
        if path.bytes().any(|b| b <= b' ' || b == 0x7F) || authority.contains('@') {
            return Err("has a space, a control character or user info".into());
        }
        let default = if https { 443 } else { 80 };
        let port_of = |port: &str| {
            let port = port.parse::<u16>().ok().filter(|p| *p > 0);
            port.ok_or("has a port that is not 1 to 65535")
        };
        // An IPv6 address is written in brackets, its port after them.
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => match bracketed.split_once(']') {
                Some((host, "")) => (host, default),
                Some((host, port)) => match port.strip_prefix(':') {
                    Some(port) => (host, port_of(port)?),
                    None => return Err("has no valid host".into()),
                },
                None => return Err("has no valid host".into()),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, port_of(port)?),
                None => (authority, default),
            },
        };
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
        if host.is_empty() || !host.chars().all(valid) {
            return Err("has no valid host".into());
        }
        Ok(Url {
            host: host.to_string(),
            port,
            authority: authority.to_string(),
            path: path.to_string(),
            https,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_why_not() {
        let t = Url::parse("http://localhost:9000/hooks/plants?x=1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 9000));
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("localhost:9000", "/hooks/plants?x=1")
        );
        let t = Url::parse("http://192.168.1.5").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = Url::parse("http://[::1]:8081/x").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8081));
        let t = Url::parse("https://[::1]/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.authority.as_str()),
            ("::1", 443, "[::1]")
        );
        // https: port 443 unless given.
        let t = Url::parse("https://hooks.example/new").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.https),
            ("hooks.example", 443, true)
        );
        assert!(!Url::parse("http://a/").unwrap().https);
        for bad in [
            "https://",
            "https://user@host/",
            "ftp://x",
            "http://",
            "http://host:0/",
            "http://host:99999/",
            "http://host:port/",
            "http://user@host/",
            "http://host/a b",
            "http://ho st/",
            "http://host/#frag",
            "http://[::1/",
            "http://[::1]x/",
            "localhost:8080",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
