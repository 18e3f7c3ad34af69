//! The socket of one exchange, opened and used within its bounds: the
//! connect within `Bounds::connect`, each read and write within
//! `Bounds::io`, and none of them past the exchange's deadline, so that a
//! server that drips a byte now and then (in a TLS handshake or in its
//! answer) cannot stretch the exchange. A streamed answer lifts the
//! deadline once its head is in; its reads keep their `io` bound.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Bounds, Url};

/// A connected socket whose every wait is bounded.
pub struct Timed {
    socket: TcpStream,
    io: Duration,
    /// When the exchange must be over (far away once a stream has lifted
    /// it).
    deadline: Instant,
}

impl Timed {
    /// A socket to `url`'s host, opened by `deadline` (each address tried
    /// for at most `bounds.connect`). The name's lookup is the system
    /// resolver's, with its own timeouts.
    pub(super) fn connect(url: &Url, bounds: &Bounds, deadline: Instant) -> io::Result<Timed> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in (url.host.as_str(), url.port).to_socket_addrs()? {
            let left = time_left(deadline)?;
            match TcpStream::connect_timeout(&addr, left.min(bounds.connect)) {
                Ok(socket) => {
                    socket.set_nodelay(true)?;
                    return Ok(Timed {
                        socket,
                        io: bounds.io,
                        deadline,
                    });
                }
                Err(e) => last = timed_out(e),
            }
        }
        Err(last)
    }

    /// From now on only each read's and write's own bound holds (an
    /// answer streamed for as long as the server has more to say).
    pub(super) fn lift_deadline(&mut self) {
        // A year is as good as never to a stream whose reads wait `io`.
        let year = Duration::from_secs(365 * 24 * 3600);
        self.deadline = Instant::now().checked_add(year).unwrap_or(self.deadline);
    }

    /// How long the next read or write may wait.
    fn wait(&self) -> io::Result<Duration> {
        Ok(time_left(self.deadline)?.min(self.io))
    }
}

/// What is left until `deadline`; an error once it has passed.
fn time_left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(left)
}

/// A socket timeout reads as `WouldBlock` ("Resource temporarily
/// unavailable"): said as what it is ("timed out").
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::ErrorKind::TimedOut.into(),
        _ => e,
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.set_read_timeout(Some(self.wait()?))?;
        self.socket.read(buf).map_err(timed_out)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket.set_write_timeout(Some(self.wait()?))?;
        self.socket.write(buf).map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}
