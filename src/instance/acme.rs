//! ACME's wiring (`--acme-domain`, the `acme` feature): the HTTPS
//! listener starts with a placeholder certificate and answers every API
//! request 503 until the `acme` thread delivers the first real one
//! ([`Gate`]); the thread's certificates are served to new connections
//! as they come; TLS-ALPN-01 is answered by the listener's resolver,
//! HTTP-01 by a second, plain listener (`--acme-http-addr`, the same
//! engine with [`Answers`] as its handler) that redirects everything else
//! to HTTPS.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use log::info;

use crate::api::App;
use crate::certs::Certificate;
use crate::certs::acme::{Challenges, Running, Settings, first_certificate};
use crate::http::{Gauge, Handler, Limits, Request, Response, Server, Stopper};
use crate::transport::{AcmeStatus, Https};

/// The 503's words, before the first certificate.
const NOT_YET: &str = "no certificate yet: ACME order in progress";

/// HTTPS before the first certificate: what the listener serves, and the
/// API behind it.
pub struct Front {
    /// A placeholder until the first certificate, answering TLS-ALPN-01
    /// challenges.
    pub certificate: Certificate,
    /// Raised by the first delivery.
    pub ready: Arc<AtomicBool>,
    /// The API, answered 503 until then ([`Gate`]).
    pub handler: Arc<dyn Handler>,
}

/// HTTPS serving a placeholder until the first certificate, with
/// `Strict-Transport-Security` when `hsts` (`--hsts`) asks, and `app`
/// behind its gate.
pub fn front(settings: &Settings, app: &Arc<App>, hsts: Option<u64>) -> io::Result<Front> {
    let certificate = first_certificate(settings).map_err(io::Error::other)?;
    if let Some(seconds) = hsts {
        certificate.https().set_hsts(seconds);
    }
    let ready = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(Gate {
        app: Arc::clone(app),
        ready: Arc::clone(&ready),
    });
    Ok(Front {
        certificate,
        ready,
        handler,
    })
}

/// Starts HTTP-01's listener and the `acme` thread (delivering to
/// `https`, then raising `ready`), which stops the listener when it is
/// stopped.
pub fn start(
    settings: &Settings,
    https: &Https,
    ready: Arc<AtomicBool>,
    gauge: &Gauge,
    limits: &Limits,
    https_port: u16,
) -> io::Result<Running> {
    let status = AcmeStatus::default();
    gauge.watch_acme(&status);
    let http = match settings.http_addr() {
        Some(addr) => Some(http01(addr, settings.challenges(), limits, https_port)?),
        None => None,
    };
    let delivered = Box::new(move || ready.store(true, Ordering::Release));
    let on_stop = Box::new(move || {
        if let Some((stopper, thread)) = http {
            stopper.stop();
            let _ = thread.join();
        }
    });
    settings.start(status, https, delivered, on_stop)
}

/// HTTP-01's plain listener, on a thread of its own.
fn http01(
    addr: SocketAddr,
    challenges: &Challenges,
    limits: &Limits,
    https_port: u16,
) -> io::Result<(Stopper, JoinHandle<usize>)> {
    let limits = Limits {
        threads: 1,
        max_connections: limits.max_connections.min(1024),
        ..limits.clone()
    };
    let answers = Arc::new(Answers {
        challenges: challenges.clone(),
        https_port,
    });
    let server = Server::bind(addr, limits, answers, &Gauge::new())?;
    info!(
        target: "plantstore",
        "ACME: answering HTTP-01 challenges on http://{}, redirecting the rest to HTTPS",
        server.local_addr()
    );
    let stopper = server.stopper();
    let thread = std::thread::Builder::new()
        .name("acme-http".into())
        .spawn(move || server.run(Duration::from_secs(1)))?;
    Ok((stopper, thread))
}

/// The API, answered 503 over HTTPS until the first certificate.
pub struct Gate {
    pub app: Arc<App>,
    pub ready: Arc<AtomicBool>,
}

impl Handler for Gate {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        if request.scheme() == "https" && !self.ready.load(Ordering::Acquire) {
            return Response::error(503, NOT_YET).with_header("Retry-After", "10");
        }
        self.app.handle(request)
    }

    fn flush(&self) {
        self.app.flush();
    }
}

/// HTTP-01's listener: the key authorization at
/// `/.well-known/acme-challenge/TOKEN`, a 308 to HTTPS for the rest. Only
/// an origin-form target (one that starts with `/`) is redirected: any
/// other (`@evil.example/x`, `http://elsewhere/`, `*`) pasted after the
/// host would make a URL of another host, so it is answered 400.
struct Answers {
    challenges: Challenges,
    https_port: u16,
}

const CHALLENGE_PATH: &str = "/.well-known/acme-challenge/";

impl Handler for Answers {
    fn handle(&self, request: &mut Request<'_>) -> Response {
        if let Some(token) = request.path().strip_prefix(CHALLENGE_PATH)
            && matches!(request.method(), "GET" | "HEAD")
        {
            return match self.challenges.http01(token) {
                Some(answer) => Response::bytes(200, "text/plain", answer.into_bytes()),
                None => Response::error(404, "no such challenge"),
            };
        }
        let host = request
            .header("host")
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(host_alone)
            .filter(|h| {
                !h.is_empty()
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-[]:".contains(&b))
            });
        let Some(host) = host else {
            return Response::error(400, "a Host header is needed to redirect to HTTPS");
        };
        if !request.target().starts_with('/') {
            return Response::error(400, "only a path (starting with /) is redirected to HTTPS");
        }
        let port = match self.https_port {
            443 => String::new(),
            port => format!(":{port}"),
        };
        Response::empty(308).with_header(
            "Location",
            format!("https://{host}{port}{}", request.target()),
        )
    }
}

/// A Host header's name, without its port.
fn host_alone(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.split(':').next().unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the HTTP-01 listener answers `request` (the HTTPS port 8443).
    fn answer(request: &str) -> String {
        let answers = Answers {
            challenges: Challenges::default(),
            https_port: 8443,
        };
        let out = crate::http::replay::serve(&answers, &[request.as_bytes()], Limits::default());
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_path_is_redirected_to_https_on_the_host_named() {
        let out = answer("GET /plants?x=1 HTTP/1.1\r\nHost: shop.example:80\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 308 "), "{out}");
        assert!(
            out.contains("\r\nLocation: https://shop.example:8443/plants?x=1\r\n"),
            "{out}"
        );
    }

    /// Regression: `GET @evil.example/x` was redirected to
    /// `https://shop.example:8443@evil.example/x`, a URL whose host is
    /// evil.example.
    #[test]
    fn a_target_that_is_not_a_path_is_refused_not_redirected() {
        for target in ["@evil.example/x", "*", ".evil.example/", "evil"] {
            let out = answer(&format!(
                "GET {target} HTTP/1.1\r\nHost: shop.example\r\n\r\n"
            ));
            assert!(!out.contains("Location"), "{target}: {out}");
            assert!(out.starts_with("HTTP/1.1 400 "), "{target}: {out}");
        }
    }
}
