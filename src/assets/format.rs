//! The packed form, stated once for both halves: `build/pack.rs` writes it
//! at build time and `assets::unpack` reads it in the server. A byte-oriented
//! LZ77, the simplest that gets most of what deflate would without an
//! inflater in the binary:
//!
//! - `HEADER` bytes, little-endian: the unpacked length;
//! - then items, each opened by one byte `b`:
//!   - `b` without the `COPY` bit: a literal run, the `b + 1` bytes that
//!     follow (1 to `MAX_RUN`);
//!   - else a copy of `(b & !COPY) + MIN_COPY` bytes (up to `MAX_COPY`),
//!     starting the number of bytes back in the output that the next two
//!     bytes give (little-endian, 1 to `WINDOW`); a copy may overlap what
//!     it makes, byte by byte.

// The server reads only what the reader needs; `build/pack.rs` (and the
// unit tests, which run it) uses every constant.
#![allow(dead_code)]

/// The unpacked length before the items.
pub const HEADER: usize = 4;
/// An item's first byte with this bit set opens a copy.
pub const COPY: u8 = 0x80;
/// The longest literal run one item holds.
pub const MAX_RUN: usize = COPY as usize;
/// The shortest and the longest copy one item makes.
pub const MIN_COPY: usize = 3;
pub const MAX_COPY: usize = MIN_COPY + (COPY as usize - 1);
/// The farthest a copy may start back: what its two bytes can say.
pub const WINDOW: usize = u16::MAX as usize;
