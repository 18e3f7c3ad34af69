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
    /// Takes `url` apart (an `https://` one only when `tls`, whether this
    /// build speaks TLS); the error says what is wrong with it.
    pub fn parse(url: &str, tls: bool) -> Result<Url, String> {
        let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) if tls => (rest, true),
            (_, Some(_)) => return Err("is https, which this plain build cannot send".into()),
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
        // An IPv6 address is written in brackets, its port after them.
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !authority.ends_with(']') => {
                let port = port.parse::<u16>().ok().filter(|p| *p > 0);
                (host, port.ok_or("has a port that is not 1 to 65535")?)
            }
            _ => (authority, if https { 443 } else { 80 }),
        };
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
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
        let t = Url::parse("http://localhost:9000/hooks/plants?x=1", true).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 9000));
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("localhost:9000", "/hooks/plants?x=1")
        );
        let t = Url::parse("http://192.168.1.5", true).unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = Url::parse("http://[::1]:8081/x", true).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8081));
        let t = Url::parse("https://[::1]/", true).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.authority.as_str()),
            ("::1", 443, "[::1]")
        );
        // https: port 443 unless given.
        let t = Url::parse("https://hooks.example/new", true).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.https),
            ("hooks.example", 443, true)
        );
        assert!(!Url::parse("http://a/", true).unwrap().https);
        assert!(Url::parse("https://hooks.example/new", false).is_err());
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
            assert!(Url::parse(bad, true).is_err(), "{bad} was accepted");
        }
    }
}
