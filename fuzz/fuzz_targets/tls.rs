//! The TLS front (the HTTPS port) fed arbitrary bytes on one connection,
//! through the connection's TLS state exactly as an event loop drives it
//! (`transport::replay::tls_exchange`), with the test certificate of
//! tests/data/tls. The corpus starts from two real ClientHellos.
//!
//! Input: one byte choosing how the rest is cut into reads, then the bytes
//! the client sends. Invariants checked, beyond "no panic" and "ends":
//!
//! 1. No byte of plaintext reaches HTTP: a client that sends no Finished
//!    made with this handshake's keys never completes one.
//! 2. A first byte that is an ASCII letter is plain HTTP, answered by the
//!    caller; nothing is written by TLS.
//! 3. How the bytes are cut into reads does not change how it ends.
//! 4. What the server writes (its handshake flight, an alert) stays small.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use plantstore::transport::from_pem;
use plantstore::transport::replay::{Config, TlsEnd, tls_exchange};

mod reads;
use reads::cut;

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let cert = include_str!("../../tests/data/tls/cert.pem");
        let key = include_str!("../../tests/data/tls/key.pem");
        let served = from_pem(cert, key).expect("the test certificate loads");
        served.server_config().expect("a configuration serves it")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let config = config();
    let whole = tls_exchange(&[stream], config.clone());
    let split = tls_exchange(&cut(stream, control), config.clone());
    for run in [&whole, &split] {
        assert_eq!(run.plaintext, 0, "plaintext before a handshake: {run:?}");
        assert!(run.written <= 16 * 1024, "wrote too much: {run:?}");
    }
    if stream.first().is_some_and(u8::is_ascii_alphabetic) {
        assert_eq!((whole.end, whole.written), (TlsEnd::PlainHttp, 0));
    }
    assert_eq!(split.end, whole.end, "read boundaries changed the end");
});
