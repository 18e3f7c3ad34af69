//! Cross-origin access for web pages (`--cors-origin`): which origins may
//! read the API's answers, and the headers that tell a browser so.
//!
//! Decisions:
//! - An origin is configured as a browser serialises it in `Origin`:
//!   `http(s)://host[:port]`, nothing after. A path, a query or a trailing
//!   slash could never match, so start-up refuses it. Scheme and host are
//!   lowercased and a default port (80, 443) dropped, as a browser does.
//!   `*` allows every origin and is answered `*`; it may be combined with
//!   others (it wins).
//! - Every response to an allowed origin carries `Access-Control-Allow-
//!   Origin`, `Access-Control-Expose-Headers` (`Link` to page, `Location`
//!   of a created plant, `WWW-Authenticate` and `Retry-After` to explain a
//!   refusal, `X-Total-Count` of a counted listing). With the flag
//!   set, every response carries `Vary: Origin`, whatever the request's
//!   origin: the answer depends on it, and a shared cache must not hand one
//!   origin's answer to another. A disallowed origin gets no
//!   `Access-Control-*` header, so the browser keeps the answer from it.
//! - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-
//!   Method`) from an allowed origin to a known path is `204` before any
//!   authentication (a browser never sends `Authorization` on a
//!   preflight), listing that path's methods and the two request headers a
//!   client needs. To an unknown path it is the usual `404` (with the
//!   headers above): there is nothing to allow. From a disallowed origin it
//!   is a plain `OPTIONS`: `405` with `Allow`. The requested method is not
//!   checked: the list answers it, and the browser refuses what is not on it.
//! - `Access-Control-Max-Age: 7200`: two hours, the most Chromium honours
//!   (Firefox takes up to a day). A preflight answer depends only on the path
//!   and the flags, so caching it long saves a round trip per request. A
//!   stale one grants nothing: the bearer token, not CORS, guards every
//!   change (a browser adds no credential of its own to these requests), and
//!   each answer is still checked for `Access-Control-Allow-Origin`.
//! - No `Access-Control-Allow-Credentials`: the API uses no cookies.
//!
//! - A refused origin is logged at info, once per origin (with the flag
//!   that would allow it), so that "why is my fetch blocked" has an answer
//!   on the server side. Same-origin requests (a browser sends `Origin` on
//!   a same-origin POST) are not refusals: an origin whose host and port
//!   are the request's `Host` is not logged. The origins remembered take at
//!   most [`REMEMBERED_BYTES`]; past that, one line says that later ones go
//!   unlogged.
//!
//! The headers for one request are a small owned value ([`CorsHeaders`]),
//! so that a response completed later on another thread (a change under
//! `--data`) carries them too.

use std::sync::Mutex;

use log::info;

use crate::http::Response;
use crate::lock::lock;

/// The most bytes of refused origins remembered (so logged once each).
pub const REMEMBERED_BYTES: usize = 16 * 1024;
/// The longest origin remembered or shown; a longer one is shown cut.
const LONGEST_ORIGIN: usize = 256;

/// The `Access-Control-Max-Age` of a preflight answer, in seconds.
pub const MAX_AGE: &str = "7200";

/// The request headers a client may send (`Access-Control-Allow-Headers`).
pub const ALLOW_HEADERS: &str = "Authorization, Content-Type, Last-Event-ID";

/// The response headers a page may read beyond the safelisted ones.
pub const EXPOSE_HEADERS: &str = "Link, Location, WWW-Authenticate, Retry-After, X-Total-Count";

/// The origins allowed to read answers from a browser.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// `*` was given.
    any: bool,
    /// The origins given, normalised as a browser sends them.
    origins: Vec<String>,
}

impl Cors {
    /// Reads the `--cors-origin` values; an error names the value and why
    /// it cannot match.
    pub fn parse(values: &[String]) -> Result<Cors, (String, &'static str)> {
        let mut cors = Cors::default();
        for value in values {
            if value == "*" {
                cors.any = true;
                continue;
            }
            let origin = origin(value).map_err(|why| (value.clone(), why))?;
            if !cors.origins.contains(&origin) {
                cors.origins.push(origin);
            }
        }
        Ok(cors)
    }

    /// Whether any origin is allowed at all (the flag was given).
    pub fn enabled(&self) -> bool {
        self.any || !self.origins.is_empty()
    }

    /// The CORS headers for a request that sent this `Origin`.
    pub fn headers(&self, origin: Option<&[u8]>) -> CorsHeaders {
        if !self.enabled() {
            return CorsHeaders::NONE;
        }
        let allow = match origin {
            _ if self.any => origin.map(|_| String::from("*")),
            Some(origin) => self
                .origins
                .iter()
                .find(|allowed| allowed.as_bytes() == origin)
                .cloned(),
            None => None,
        };
        CorsHeaders {
            vary: true,
            allow_origin: allow,
        }
    }
}

/// The origins refused so far, each logged once.
#[derive(Debug, Default)]
pub struct RefusedOrigins {
    state: Mutex<RefusedOriginsState>,
}

#[derive(Debug, Default)]
struct RefusedOriginsState {
    /// A list: at most `REMEMBERED_BYTES` of them, looked at only for a
    /// refused origin.
    origins: Vec<Box<[u8]>>,
    bytes: usize,
    /// The bound was reached (and said so).
    full: bool,
}

impl RefusedOrigins {
    /// Logs `origin`, which the headers refused for a request to `host`,
    /// unless it is the request's own origin or was logged before.
    pub fn note(&self, origin: &[u8], host: Option<&[u8]>) {
        if host.is_some_and(|host| same_origin(origin, host)) {
            return;
        }
        let origin = &origin[..origin.len().min(LONGEST_ORIGIN)];
        let mut state = lock(&self.state);
        if state.full || state.origins.iter().any(|o| **o == *origin) {
            return;
        }
        let shown = String::from_utf8_lossy(origin);
        if state.bytes + origin.len() > REMEMBERED_BYTES {
            state.full = true;
            info!(
                "CORS: refused origin {shown:?}; {REMEMBERED_BYTES} bytes of refused origins \
                 are logged already, later ones are not"
            );
            return;
        }
        state.bytes += origin.len();
        state.origins.push(origin.into());
        info!(
            "CORS: refused origin {shown:?}: a browser keeps the answers from its pages \
             (--cors-origin {shown} would allow it); logged once"
        );
    }
}

/// Whether `origin` (`scheme://host[:port]`) names the same host and port
/// as a `Host` header (a default port written or not), ignoring case.
fn same_origin(origin: &[u8], host: &[u8]) -> bool {
    let scheme = |name: &[u8]| {
        origin
            .get(..name.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(name))
    };
    let (rest, default): (&[u8], &[u8]) = if scheme(b"http://") {
        (&origin[7..], b":80")
    } else if scheme(b"https://") {
        (&origin[8..], b":443")
    } else {
        return false;
    };
    let bare = |name: &'_ [u8]| -> usize {
        let tail = name.len().saturating_sub(default.len());
        if name[tail..] == *default {
            tail
        } else {
            name.len()
        }
    };
    rest[..bare(rest)].eq_ignore_ascii_case(&host[..bare(host)])
}

/// The CORS headers one response gets: owned, so a response completed on
/// another thread can carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsHeaders {
    /// `Vary: Origin` (the flag is set).
    vary: bool,
    /// `Access-Control-Allow-Origin`, for an allowed origin.
    allow_origin: Option<String>,
}

impl CorsHeaders {
    /// No CORS: the flag is not set.
    pub const NONE: CorsHeaders = CorsHeaders {
        vary: false,
        allow_origin: None,
    };

    /// Whether the request came from an allowed origin.
    pub fn allowed(&self) -> bool {
        self.allow_origin.is_some()
    }

    /// `response` with these headers.
    pub fn apply(&self, response: Response) -> Response {
        let response = if self.vary {
            response.with_header("Vary", "Origin")
        } else {
            response
        };
        match &self.allow_origin {
            None => response,
            Some(origin) => response
                .with_header("Access-Control-Allow-Origin", origin.as_str())
                .with_header("Access-Control-Expose-Headers", EXPOSE_HEADERS),
        }
    }
}

/// The `204` answer to a preflight for a path that allows `methods`, to be
/// sent with the [`CorsHeaders`] of an allowed origin.
pub fn preflight(methods: String) -> Response {
    Response::no_content()
        .with_header("Access-Control-Allow-Methods", methods)
        .with_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
        .with_header("Access-Control-Max-Age", MAX_AGE)
}

/// `value` as a browser would send it in `Origin`, or why it never could.
/// (Also how `Link` makes a request's `Host` into an absolute URL.)
pub(super) fn origin(value: &str) -> Result<String, &'static str> {
    let lower = value.to_ascii_lowercase();
    let (scheme, rest, default_port) = if let Some(rest) = lower.strip_prefix("http://") {
        ("http", rest, "80")
    } else if let Some(rest) = lower.strip_prefix("https://") {
        ("https", rest, "443")
    } else {
        return Err("is not * or an origin such as https://plants.example:8443");
    };
    if rest.ends_with('/') {
        return Err("ends with a slash: an origin has no path, and a browser never sends one");
    }
    if rest.contains(['/', '?', '#']) {
        return Err("has a path, query or fragment: an origin is scheme://host[:port] only");
    }
    if rest.contains('@') {
        return Err("has user information: an origin is scheme://host[:port] only");
    }
    let (host, port) = split_port(rest)?;
    if !valid_host(host) {
        return Err("has no valid host name or IP address");
    }
    match port {
        Some(p) if p == default_port => Ok(format!("{scheme}://{host}")),
        Some(p) => Ok(format!("{scheme}://{host}:{p}")),
        None => Ok(format!("{scheme}://{host}")),
    }
}

/// The host and the port (digits, 1 to 65535, without leading zeros) of
/// `host[:port]`; an IPv6 host is in brackets.
fn split_port(rest: &str) -> Result<(&str, Option<&str>), &'static str> {
    let colon = if rest.starts_with('[') {
        let close = rest.find(']').ok_or("has an IPv6 address without its ]")?;
        match &rest[close + 1..] {
            "" => None,
            tail if tail.starts_with(':') => Some(close + 1),
            _ => return Err("has something after the IPv6 address that is not a port"),
        }
    } else {
        rest.rfind(':')
    };
    let Some(colon) = colon else {
        return Ok((rest, None));
    };
    let (host, port) = (&rest[..colon], &rest[colon + 1..]);
    let number = port
        .parse::<u16>()
        .ok()
        .filter(|_| port.bytes().all(|b| b.is_ascii_digit()));
    match number {
        Some(n) if n > 0 && !port.starts_with('0') => Ok((host, Some(port))),
        _ => Err("has a port that is not a number from 1 to 65535"),
    }
}

/// A DNS name (letters, digits, hyphens, dots; no empty label), an IPv4
/// address, or an IPv6 address in brackets.
fn valid_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_the_requests_own_when_host_and_port_match() {
        assert!(same_origin(b"http://127.0.0.1:8080", b"127.0.0.1:8080"));
        assert!(same_origin(b"HTTP://Plants.Example", b"plants.example:80"));
        assert!(same_origin(
            b"https://plants.example:443",
            b"plants.example"
        ));
        assert!(!same_origin(
            b"https://plants.example",
            b"plants.example:80"
        ));
        assert!(!same_origin(b"http://127.0.0.1:8081", b"127.0.0.1:8080"));
        assert!(!same_origin(b"null", b"null"));
    }

    #[test]
    fn refused_origins_are_remembered_up_to_their_byte_bound() {
        let refused = RefusedOrigins::default();
        refused.note(b"http://a.example", Some(b"b.example"));
        refused.note(b"http://a.example", None);
        refused.note(b"http://b.example", Some(b"b.example"));
        assert_eq!(
            lock(&refused.state).origins.len(),
            1,
            "once, and not the own origin"
        );
        let long = [b'x'; 1000];
        refused.note(&long, None);
        assert_eq!(
            lock(&refused.state).bytes,
            16 + LONGEST_ORIGIN,
            "shown and kept cut"
        );
        for n in 0..200 {
            refused.note(format!("http://{n:0>200}.example").as_bytes(), None);
        }
        let state = lock(&refused.state);
        assert!(state.full && state.bytes <= REMEMBERED_BYTES);
    }

    fn parse(values: &[&str]) -> Result<Cors, (String, &'static str)> {
        Cors::parse(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn origins_are_kept_as_a_browser_sends_them() {
        for (given, kept) in [
            ("http://localhost:3000", "http://localhost:3000"),
            ("https://Plants.Example", "https://plants.example"),
            ("HTTPS://plants.example:443", "https://plants.example"),
            ("http://plants.example:80", "http://plants.example"),
            ("http://plants.example:443", "http://plants.example:443"),
            ("http://127.0.0.1:8081", "http://127.0.0.1:8081"),
            ("http://[::1]:8081", "http://[::1]:8081"),
            ("http://[::1]", "http://[::1]"),
        ] {
            assert_eq!(origin(given).as_deref(), Ok(kept), "{given}");
        }
    }

    #[test]
    fn what_could_never_match_is_refused_saying_why() {
        for (given, why) in [
            ("https://plants.example/", "ends with a slash"),
            ("http://localhost:3000/", "ends with a slash"),
            ("https://plants.example/app", "has a path"),
            ("https://plants.example?x", "has a path"),
            ("https://u@plants.example", "user information"),
            ("plants.example", "is not *"),
            ("ftp://plants.example", "is not *"),
            ("null", "is not *"),
            ("", "is not *"),
            ("**", "is not *"),
            ("https://", "no valid host"),
            ("https://plants..example", "no valid host"),
            ("https://pl_ants.example", "no valid host"),
            ("https://plants.example:", "port"),
            ("https://plants.example:0", "port"),
            ("https://plants.example:65536", "port"),
            ("https://plants.example:+80", "port"),
            ("https://plants.example:080", "port"),
            ("https://[::1", "IPv6"),
            ("https://[::1]x", "after the IPv6"),
            ("https://[zz]", "no valid host"),
            ("https://a:b:1", "no valid host"),
        ] {
            let error = origin(given).unwrap_err();
            assert!(error.contains(why), "{given}: {error}");
        }
    }

    #[test]
    fn an_allowed_origin_gets_itself_back_and_others_get_only_vary() {
        let cors = parse(&["https://a.example", "http://localhost:3000"]).unwrap();
        let allowed = cors.headers(Some(b"http://localhost:3000"));
        assert_eq!(
            allowed.allow_origin.as_deref(),
            Some("http://localhost:3000")
        );
        for other in [
            &b"http://localhost:3001"[..],
            b"https://a.example/",
            b"null",
        ] {
            let headers = cors.headers(Some(other));
            assert!(!headers.allowed() && headers.vary);
        }
        assert!(!cors.headers(None).allowed() && cors.headers(None).vary);
    }

    #[test]
    fn a_star_answers_star_to_any_origin() {
        let cors = parse(&["https://a.example", "*"]).unwrap();
        let headers = cors.headers(Some(b"http://anything:1"));
        assert_eq!(headers.allow_origin.as_deref(), Some("*"));
        assert!(!cors.headers(None).allowed());
    }

    #[test]
    fn without_the_flag_nothing_is_added() {
        let cors = parse(&[]).unwrap();
        assert!(!cors.enabled());
        let headers = cors.headers(Some(b"http://localhost:3000"));
        assert_eq!(headers, CorsHeaders::NONE);
        // Compared as Debug text, which shows every header: no `==` needed.
        let unchanged = headers.apply(Response::no_content());
        assert_eq!(
            format!("{unchanged:?}"),
            format!("{:?}", Response::no_content())
        );
    }

    #[test]
    fn a_preflight_answer_lists_methods_headers_and_max_age() {
        let cors = parse(&["http://localhost:3000"]).unwrap();
        let answer = cors
            .headers(Some(b"http://localhost:3000"))
            .apply(preflight("GET, HEAD, POST".to_owned()));
        let want = Response::no_content()
            .with_header("Access-Control-Allow-Methods", "GET, HEAD, POST")
            .with_header(
                "Access-Control-Allow-Headers",
                "Authorization, Content-Type, Last-Event-ID",
            )
            .with_header("Access-Control-Max-Age", "7200")
            .with_header("Vary", "Origin")
            .with_header("Access-Control-Allow-Origin", "http://localhost:3000")
            .with_header(
                "Access-Control-Expose-Headers",
                "Link, Location, WWW-Authenticate, Retry-After, X-Total-Count",
            );
        assert_eq!(format!("{answer:?}"), format!("{want:?}"));
    }
}
