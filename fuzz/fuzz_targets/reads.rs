//! How a fuzz input's bytes are cut into reads (shared by the targets
//! that check that read boundaries change nothing).

/// Cuts `stream` into reads whose lengths follow a small generator seeded
/// by `control`.
pub fn cut(stream: &[u8], control: u8) -> Vec<&[u8]> {
    let mut state = u32::from(control) | 0x100;
    let mut reads = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (state as usize % 17 + 1).min(rest.len());
        let (read, tail) = rest.split_at(n);
        reads.push(read);
        rest = tail;
    }
    reads
}
