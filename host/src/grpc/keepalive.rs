//! gRPC's keepalive enforcement, which hyper lacks: a client that pings more often than
//! `server.client_min_ping_interval` while the server has nothing to send gets a GOAWAY
//! `ENHANCE_YOUR_CALM` "too_many_pings" and is disconnected (grpc-go's server policy, three
//! strikes; a gRPC client that receives it backs its ping interval off).
//!
//! The connection's bytes are watched, not changed: [`FrameCursor`] follows the HTTP/2 frame
//! headers in each direction, and [`PingPolicy`] counts the client's PINGs against the server's
//! DATA and HEADERS frames.

use std::time::{Duration, Instant};

/// The HTTP/2 client connection preface that precedes the client's first frame.
const CLIENT_PREFACE_LEN: usize = 24;
const HEADER_LEN: usize = 9;
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;
/// Pings allowed too early before the connection is closed (grpc-go's `maxPingStrikes`).
const MAX_STRIKES: u32 = 2;
/// Without an open stream a client has no reason to ping: at most once per this long (grpc-go's
/// `PermitWithoutStream = false`).
const IDLE_PING_INTERVAL: Duration = Duration::from_secs(2 * 60 * 60);

/// The header of one HTTP/2 frame: its type and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
}

/// Follows the frame boundaries of one direction of an HTTP/2 connection, however the bytes are
/// split.
#[derive(Debug)]
pub struct FrameCursor {
    preface_left: usize,
    header: [u8; HEADER_LEN],
    header_len: usize,
    payload_left: usize,
}

impl FrameCursor {
    /// The client → server direction, which starts with the connection preface.
    pub fn client() -> Self {
        Self {
            preface_left: CLIENT_PREFACE_LEN,
            ..Self::server()
        }
    }

    /// The server → client direction.
    pub fn server() -> Self {
        Self {
            preface_left: 0,
            header: [0; HEADER_LEN],
            header_len: 0,
            payload_left: 0,
        }
    }

    /// Whether the bytes so far end exactly between two frames.
    pub fn at_boundary(&self) -> bool {
        self.preface_left == 0 && self.header_len == 0 && self.payload_left == 0
    }

    /// Follows `bytes`, calling `on_frame` for each frame header completed in them.
    pub fn feed(&mut self, mut bytes: &[u8], mut on_frame: impl FnMut(Frame)) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (HEADER_LEN - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
                self.header_len += n;
                bytes = &bytes[n..];
                if self.header_len == HEADER_LEN {
                    let h = self.header;
                    self.payload_left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    self.header_len = 0;
                    on_frame(Frame {
                        kind: h[3],
                        flags: h[4],
                    });
                }
            }
        }
    }
}

/// grpc-go's server ping policy for one connection.
#[derive(Debug)]
pub struct PingPolicy {
    min_interval: Duration,
    last_ping: Option<Instant>,
    strikes: u32,
    /// The server sent DATA or HEADERS since the last ping: the next one is not counted.
    server_sent: bool,
}

impl PingPolicy {
    pub fn new(min_interval: Duration) -> Self {
        Self {
            min_interval,
            last_ping: None,
            strikes: 0,
            server_sent: false,
        }
    }

    /// A frame the server wrote.
    pub fn server_frame(&mut self, frame: Frame) {
        if frame.kind == DATA || frame.kind == HEADERS {
            self.server_sent = true;
        }
    }

    /// A frame the client sent, with the calls open on the connection: whether the client has
    /// now pinged too often.
    pub fn client_frame(&mut self, frame: Frame, now: Instant, open_streams: usize) -> bool {
        if frame.kind != PING || frame.flags & ACK != 0 {
            return false;
        }
        let last = self.last_ping.replace(now);
        if std::mem::take(&mut self.server_sent) {
            self.strikes = 0;
            return false;
        }
        let allowed = if open_streams == 0 {
            IDLE_PING_INTERVAL
        } else {
            self.min_interval
        };
        if last.is_some_and(|last| now.duration_since(last) < allowed) {
            self.strikes += 1;
        }
        self.strikes > MAX_STRIKES
    }
}

/// The GOAWAY frame sent to a client that pinged too often (last stream id 0: nothing more is
/// processed).
pub fn too_many_pings_goaway() -> Vec<u8> {
    const DEBUG: &[u8] = b"too_many_pings";
    const ENHANCE_YOUR_CALM: u32 = 0xb;
    let len = 8 + DEBUG.len();
    let mut frame = Vec::with_capacity(HEADER_LEN + len);
    frame.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_be_bytes()[1..]);
    frame.extend_from_slice(&[0x7, 0]);
    frame.extend_from_slice(&0u32.to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes());
    frame.extend_from_slice(&ENHANCE_YOUR_CALM.to_be_bytes());
    frame.extend_from_slice(DEBUG);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = (u32::try_from(payload.len()).unwrap().to_be_bytes()[1..]).to_vec();
        f.extend_from_slice(&[kind, flags, 0, 0, 0, 1]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_are_found_however_the_bytes_are_split() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, &[0; 12]));
        bytes.extend(frame(PING, 0, &[7; 8]));
        bytes.extend(frame(DATA, 1, &[1; 300]));
        bytes.extend(frame(PING, ACK, &[7; 8]));
        let want = vec![
            Frame { kind: 0x4, flags: 0 },
            Frame { kind: PING, flags: 0 },
            Frame { kind: DATA, flags: 1 },
            Frame { kind: PING, flags: ACK },
        ];
        for chunk in [1, 2, 5, 9, 10, 64, bytes.len()] {
            let mut cursor = FrameCursor::client();
            let mut seen = Vec::new();
            for part in bytes.chunks(chunk) {
                cursor.feed(part, |f| seen.push(f));
            }
            assert_eq!(seen, want, "in chunks of {chunk}");
            assert!(cursor.at_boundary());
        }
        let mut cursor = FrameCursor::server();
        cursor.feed(&frame(DATA, 0, &[0; 10])[..12], |_| {});
        assert!(!cursor.at_boundary(), "in the middle of a payload");
    }

    #[test]
    fn a_client_pinging_too_fast_gets_three_strikes() {
        let ping = Frame { kind: PING, flags: 0 };
        let start = Instant::now();
        let mut policy = PingPolicy::new(Duration::from_secs(5));
        let at = |s: u64| start + Duration::from_secs(s);
        assert!(!policy.client_frame(ping, at(0), 1), "the first ping is fine");
        assert!(!policy.client_frame(ping, at(1), 1), "strike 1");
        assert!(!policy.client_frame(ping, at(2), 1), "strike 2");
        assert!(policy.client_frame(ping, at(3), 1), "strike 3: out");

        let mut policy = PingPolicy::new(Duration::from_secs(5));
        for s in 0..20 {
            assert!(!policy.client_frame(ping, at(s * 5), 1), "every 5s is allowed");
            assert!(
                !policy.client_frame(Frame { kind: PING, flags: ACK }, at(s * 5 + 1), 1),
                "acks are answers"
            );
        }

        let mut policy = PingPolicy::new(Duration::from_secs(5));
        for s in 0..20 {
            policy.server_frame(Frame { kind: DATA, flags: 0 });
            assert!(
                !policy.client_frame(ping, at(s), 1),
                "pings while data flows (BDP) are fine"
            );
        }

        let mut policy = PingPolicy::new(Duration::from_secs(5));
        let idle: Vec<bool> = (0..4).map(|i| policy.client_frame(ping, at(i * 60), 0)).collect();
        assert_eq!(
            idle,
            [false, false, false, true],
            "no open stream: pings every minute are too many"
        );
    }

    #[test]
    fn the_goaway_is_a_well_formed_frame() {
        let f = too_many_pings_goaway();
        let mut cursor = FrameCursor::server();
        let mut seen = Vec::new();
        cursor.feed(&f, |f| seen.push(f));
        assert_eq!(seen, [Frame { kind: 0x7, flags: 0 }]);
        assert!(cursor.at_boundary());
        assert_eq!(&f[13..17], &[0, 0, 0, 0xb]);
        assert!(f.ends_with(b"too_many_pings"));
    }
}
