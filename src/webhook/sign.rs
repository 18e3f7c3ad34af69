//! Signing, the Standard Webhooks way: the key read from
//! `--webhook-secret-file` (`whsec_<base64>`, or the text as it is) and
//! the `webhook-signature` of an attempt.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Reads a `--webhook-secret-file`: `whsec_<base64>` or raw text.
pub fn read_secret(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    let key = match text.strip_prefix("whsec_") {
        Some(encoded) => BASE64
            .decode(encoded)
            .map_err(|e| format!("whsec_ secret is not base64: {e}"))?,
        None => text.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return Err("the secret is empty".into());
    }
    Ok(key)
}

/// The signing key shared by the workers; `None` sends unsigned deliveries.
pub(super) type Secret = std::sync::RwLock<Option<std::sync::Arc<[u8]>>>;

/// `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
pub fn sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length; this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_whsec_base64_or_raw() {
        assert_eq!(read_secret("whsec_aGVsbG8=\n").unwrap(), b"hello");
        assert_eq!(read_secret("  plain secret \n").unwrap(), b"plain secret");
        assert!(read_secret("whsec_!!!").is_err());
        assert!(read_secret(" \n").is_err());
    }

    #[test]
    fn signature_matches_the_standard_webhooks_example() {
        // The example in the Standard Webhooks specification.
        let key = read_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
