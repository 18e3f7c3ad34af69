//! Chunked transfer coding on the way out: how a streamed response body is
//! framed for an HTTP/1.1 client (RFC 9112 §7.1).
//!
//! Each piece the stream makes becomes one chunk (its size in lower-case
//! hexadecimal, CRLF, the bytes, CRLF), and the body ends with the last
//! chunk and an empty trailer section. An empty piece is written as
//! nothing, never as a zero-size chunk, which would end the body early.
//!
//! What it does not do: decode a request's chunks (`body` does, strictly),
//! send extensions or trailers, or decide when a body is chunked (the
//! protocol does, from the client's version).

/// Appends `piece` to `out` as one chunk; nothing if it is empty.
pub(super) fn write(out: &mut Vec<u8>, piece: &[u8]) {
    if piece.is_empty() {
        return;
    }
    let mut size = [0u8; 16];
    out.extend_from_slice(size_in_hex(piece.len(), &mut size));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(piece);
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk and an empty trailer section: the body is
/// complete.
pub(super) fn write_last(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

/// `n` in lower-case hexadecimal, written at the end of `buf`.
fn size_in_hex(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            return &buf[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_lower_case_hex_without_leading_zeros() {
        let mut buf = [0u8; 16];
        assert_eq!(size_in_hex(1, &mut buf), b"1");
        assert_eq!(size_in_hex(10_000, &mut buf), b"2710");
        assert_eq!(size_in_hex(0xabc, &mut buf), b"abc");
        assert_eq!(size_in_hex(usize::MAX, &mut buf), &[b'f'; 16][..]);
    }

    #[test]
    fn pieces_become_chunks_and_an_empty_piece_never_ends_the_body() {
        let mut out = Vec::new();
        write(&mut out, b"hello");
        write(&mut out, b"");
        write(&mut out, &[b'x'; 26]);
        write_last(&mut out);
        let mut want = b"5\r\nhello\r\n1a\r\n".to_vec();
        want.extend_from_slice(&[b'x'; 26]);
        want.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(out, want);
    }
}
