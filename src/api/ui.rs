//! The built-in page at `/`: browse and edit plants from a browser.
//!
//! Four hand-written files (`ui/index.html`, `ui.css`, `ui.js`, `ui.svg`),
//! compiled into the binary packed (`assets`), at most 18 KiB together
//! unpacked (a unit test holds that). No framework, nothing loaded from
//! elsewhere. The page needs no token to load; it asks for one and keeps
//! it in `sessionStorage` (gone with the tab), calls the API with `fetch`
//! from the same origin, and follows the change feed with `EventSource`
//! and a ticket (a read token's ticket says so, and the page then has no
//! edit controls).
//! `--no-ui` turns it off: these paths are then 404 like any unknown path.
//!
//! Every file is served with a strict `Content-Security-Policy` (only this
//! origin's script, style and images; no inline script or style; no
//! framing, no form submission, no `<base>`), `X-Content-Type-Options:
//! nosniff` and `Referrer-Policy: no-referrer`. Caching: a strong `ETag`
//! (part of the SHA-256 of the bytes, computed once at start-up) with
//! `Cache-Control: no-cache`, so a browser always revalidates, and a
//! matching `If-None-Match` is answered `304` with no body: a new binary's
//! page is never hidden behind an old one, and an unchanged one costs a few
//! header bytes.

use sha2::{Digest, Sha256};

use crate::assets;
use crate::http::{Request, Response};

/// The policy every file is served with.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One of the page's files (where each is served is its row's, in
/// `routes::ROUTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The HTML.
    Page,
    Style,
    Script,
    /// The icon.
    Icon,
}

/// Every part, in the order of `Part::index`.
pub(super) const PARTS: [Part; 4] = [Part::Page, Part::Style, Part::Script, Part::Icon];

impl Part {
    /// Its position in `PARTS`.
    pub fn index(self) -> usize {
        self as usize
    }

    fn content_type(self) -> &'static str {
        match self {
            Part::Page => "text/html; charset=utf-8",
            Part::Style => "text/css; charset=utf-8",
            Part::Script => "text/javascript; charset=utf-8",
            Part::Icon => "image/svg+xml",
        }
    }

    /// The file as compiled in (packed).
    fn packed(self) -> &'static [u8] {
        match self {
            Part::Page => assets::INDEX_HTML,
            Part::Style => assets::UI_CSS,
            Part::Script => assets::UI_JS,
            Part::Icon => assets::UI_SVG,
        }
    }

    /// The file.
    fn bytes(self) -> Vec<u8> {
        assets::unpack(self.packed())
    }
}

/// The page's files with their entity tags.
#[derive(Debug)]
pub struct Ui {
    etags: [String; PARTS.len()],
}

impl Default for Ui {
    fn default() -> Ui {
        Ui::new()
    }
}

impl Ui {
    /// Computes each file's `ETag` once, from its packed bytes (the same
    /// file always packs the same).
    pub fn new() -> Ui {
        Ui {
            etags: PARTS.map(|part| etag(part.packed())),
        }
    }

    /// `GET` or `HEAD` of `part`: the file, or `304` when the client's
    /// `If-None-Match` names it.
    pub fn serve(&self, part: Part, request: &Request<'_>) -> Response {
        let etag = &self.etags[part.index()];
        let fresh = request
            .header("if-none-match")
            .is_some_and(|tags| none_match(tags, etag));
        let response = if fresh {
            Response::empty(304)
        } else {
            Response::bytes(200, part.content_type(), part.bytes())
        };
        response
            .with_header("ETag", etag.as_str())
            .with_header("Cache-Control", "no-cache")
            .with_header("Content-Security-Policy", CSP)
            .with_header("X-Content-Type-Options", "nosniff")
            .with_header("Referrer-Policy", "no-referrer")
    }
}

/// A strong entity tag: the first 128 bits of the SHA-256, in hex, quoted.
fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether an `If-None-Match` value matches `etag`: `*`, or a list naming
/// it (weak comparison, as RFC 9110 asks for this header, so `W/` is
/// ignored).
fn none_match(header: &[u8], etag: &str) -> bool {
    header.split(|&b| b == b',').any(|tag| {
        let tag = tag.trim_ascii();
        tag == b"*" || tag.strip_prefix(b"W/").unwrap_or(tag) == etag.as_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most bytes the page's files may take together.
    const BUDGET: usize = 18 * 1024;

    #[test]
    fn the_page_fits_its_budget() {
        let total: usize = PARTS.iter().map(|part| part.bytes().len()).sum();
        assert!(
            total <= BUDGET,
            "the page takes {total} bytes, over {BUDGET}"
        );
    }

    #[test]
    fn the_page_has_no_inline_script_or_style_and_loads_its_own_files() {
        let html = String::from_utf8(Part::Page.bytes()).unwrap();
        let html = html.as_str();
        assert!(!html.contains("style="), "no style attribute");
        assert!(!html.contains("<style"), "no style element");
        assert_eq!(html.matches("<script").count(), 1);
        assert!(html.contains(r#"<script src="/ui.js" defer></script>"#));
        assert!(html.contains(r#"<link rel="stylesheet" href="/ui.css">"#));
        assert!(html.contains(r#"<link rel="icon" href="/ui.svg""#));
        assert!(!has_handler(html), "no inline event handler");
        assert!(html.contains(r#"<meta name="viewport""#));
        // Nothing from elsewhere: no absolute or scheme-relative address
        // (the SVG namespace is a name, never fetched).
        for part in PARTS {
            let text = String::from_utf8(part.bytes()).unwrap();
            let text = text.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
            for address in ["http:", "https:", "=\"//", "('//", "url("] {
                assert!(!text.contains(address), "{part:?} has {address}");
            }
        }
    }

    /// Whether `html` has an attribute such as ` onclick=`.
    fn has_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            letters > 0 && rest[letters..].starts_with('=')
        })
    }

    #[test]
    fn every_part_is_at_its_index() {
        for part in PARTS {
            assert_eq!(PARTS[part.index()], part);
        }
    }

    #[test]
    fn if_none_match_follows_weak_comparison() {
        let etag = etag(b"page");
        assert_eq!(etag.len(), 34);
        assert!(none_match(etag.as_bytes(), &etag));
        assert!(none_match(format!("W/{etag}").as_bytes(), &etag));
        assert!(none_match(format!("\"x\", {etag}").as_bytes(), &etag));
        assert!(none_match(b"*", &etag));
        assert!(!none_match(b"\"x\"", &etag));
        assert!(!none_match(etag.trim_matches('"').as_bytes(), &etag));
        assert!(!none_match(b"", &etag));
        assert_ne!(super::etag(b"page"), super::etag(b"page2"));
    }
}
