//! The shared-memory path's wire and region layout, as pure functions: the offer, the
//! descriptor that replaces a frame, the mark on a frame's length, and where things
//! are in a region. Nothing here touches a socket or a mapping; every decoder
//! validates and returns an error instead of panicking.

use super::error::ShmError;
use std::fmt;

/// The granule of the region: the header is padded to it and every span is a whole
/// number of them (page-aligned data, no two spans sharing a page).
pub const PAGE: u64 = 4096;
/// The smallest region (`PS_SHM_MB` = 1).
pub const MIN_REGION: u64 = 1 << 20;
/// The largest region (`PS_SHM_MB` = 4096).
pub const MAX_REGION: u64 = 4 << 30;
/// The most spans a region tracks at once (one release flag each).
pub const MAX_SLOTS: u32 = 65_536;
/// The first 8 bytes of every region.
pub const REGION_MAGIC: [u8; 8] = *b"PSRSSHM1";
/// Where the release flags start in the region (after magic and token).
pub const FLAGS_OFFSET: u64 = 64;
/// The magic that starts an offer on the stream (a message starts with `PSRS`).
pub const OFFER_MAGIC: u32 = u32::from_le_bytes(*b"PSRO");
/// Bit 63 of a frame's length in the message header: the frame's body is a
/// [`Descriptor`] of [`DESC_LEN`] bytes, not the data. A real frame never has it
/// (`PS_MAX_MESSAGE_BYTES` is far below 2^63).
pub const SHM_BIT: u64 = 1 << 63;
/// Bytes of an encoded [`Descriptor`].
pub const DESC_LEN: usize = 24;
/// Bytes of an encoded [`Offer`] body.
pub const OFFER_LEN: usize = 72;
/// The offer format's version.
pub const OFFER_VERSION: u32 = 1;
/// The accepting side's one-byte answers.
pub const ACCEPT: u8 = 1;
/// See [`ACCEPT`].
pub const REFUSE: u8 = 0;
/// A release flag's value while the receiver may still read the span.
pub const IN_USE: u32 = 1;
/// A release flag's value once the receiver dropped the span (or before first use).
pub const RELEASED: u32 = 0;

/// Where the parts of a region of a given size are. Sender and receiver compute it
/// from the size alone, so a receiver never trusts layout fields inside the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The whole region, bytes.
    pub total: u64,
    /// Release flags (one `u32` each at [`FLAGS_OFFSET`]), = the most live spans.
    pub slots: u32,
    /// Where the data area starts (page-aligned).
    pub data_offset: u64,
    /// Bytes of the data area (a whole number of pages).
    pub data_len: u64,
}

impl Layout {
    /// The layout of a region of `total` bytes: a multiple of [`PAGE`] within
    /// [`MIN_REGION`]..=[`MAX_REGION`], else [`ShmError::Invalid`] naming the size.
    pub fn new(total: u64) -> Result<Layout, ShmError> {
        if !(MIN_REGION..=MAX_REGION).contains(&total) || total & (PAGE - 1) != 0 {
            return Err(ShmError::Invalid(format!(
                "region of {total} bytes: not a multiple of {PAGE} within {MIN_REGION}..={MAX_REGION}"
            )));
        }
        let slots = (total / PAGE).min(MAX_SLOTS as u64) as u32;
        let data_offset = (FLAGS_OFFSET + 4 * slots as u64).div_ceil(PAGE) * PAGE;
        Ok(Layout {
            total,
            slots,
            data_offset,
            data_len: total - data_offset,
        })
    }
}

/// Where one frame's bytes are in the data area, and which release flag frees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The release flag the receiver clears when it drops the frame.
    pub slot: u32,
    /// Offset of the bytes from the start of the data area.
    pub offset: u64,
    /// The frame's length (> 0).
    pub len: u64,
}

/// Why a descriptor (or a marked frame) was refused; the message carrying it is
/// dropped and logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescError {
    /// A marked frame whose body is not [`DESC_LEN`] bytes.
    Length(usize),
    /// The reserved field is not zero.
    Reserved(u32),
    /// The slot is past the region's flags.
    Slot(u32, u32),
    /// An empty span.
    Empty,
    /// The span does not lie within the data area.
    OutOfRange {
        /// Claimed offset.
        offset: u64,
        /// Claimed length.
        len: u64,
        /// The data area's size.
        data_len: u64,
    },
    /// A marked frame on a connection whose offer was not accepted.
    NoRegion,
}

impl fmt::Display for DescError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescError::Length(n) => write!(f, "shared-memory descriptor of {n} bytes (want {DESC_LEN})"),
            DescError::Reserved(r) => write!(f, "shared-memory descriptor with reserved field {r:#x}"),
            DescError::Slot(s, n) => write!(f, "shared-memory descriptor slot {s} (region has {n})"),
            DescError::Empty => write!(f, "empty shared-memory descriptor"),
            DescError::OutOfRange { offset, len, data_len } => write!(
                f,
                "shared-memory descriptor {offset}+{len} outside the {data_len}-byte data area"
            ),
            DescError::NoRegion => write!(f, "shared-memory descriptor on a link without shared memory"),
        }
    }
}

impl Descriptor {
    /// The 24 wire bytes: slot (u32 LE), reserved 0 (u32), offset (u64 LE), len (u64 LE).
    pub fn encode(&self) -> [u8; DESC_LEN] {
        let mut b = [0u8; DESC_LEN];
        b[..4].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decodes `b` and checks it against `layout`: the span is non-empty and inside the
    /// data area, the slot exists, the reserved field is zero.
    pub fn decode(b: &[u8], layout: &Layout) -> Result<Descriptor, DescError> {
        if b.len() != DESC_LEN {
            return Err(DescError::Length(b.len()));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let d = Descriptor {
            slot: u32_at(0),
            offset: u64_at(8),
            len: u64_at(16),
        };
        if u32_at(4) != 0 {
            return Err(DescError::Reserved(u32_at(4)));
        }
        if d.slot >= layout.slots {
            return Err(DescError::Slot(d.slot, layout.slots));
        }
        if d.len == 0 {
            return Err(DescError::Empty);
        }
        match d.offset.checked_add(d.len) {
            Some(end) if end <= layout.data_len => Ok(d),
            _ => Err(DescError::OutOfRange {
                offset: d.offset,
                len: d.len,
                data_len: layout.data_len,
            }),
        }
    }
}

/// The connecting side's proposal: "map my region". Sent once, right after the
/// handshake, only to a peer on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// `/proc/sys/kernel/random/boot_id` of the sender's host (36 ASCII bytes).
    pub boot_id: [u8; 36],
    /// The sender's process id.
    pub pid: u32,
    /// The memfd's descriptor number in the sender (`/proc/<pid>/fd/<fd>`).
    pub fd: u32,
    /// The region's size in bytes.
    pub size: u64,
    /// Random bytes also written after [`REGION_MAGIC`] in the region: proves the
    /// receiver mapped the region offered, not another file of that number.
    pub token: [u8; 16],
}

impl Offer {
    /// `OFFER_MAGIC` (u32 LE), body length (u32 LE, = [`OFFER_LEN`]), then the body:
    /// version (u32), boot id (36), pid (u32), fd (u32), size (u64), token (16).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + OFFER_LEN);
        b.extend_from_slice(&OFFER_MAGIC.to_le_bytes());
        b.extend_from_slice(&(OFFER_LEN as u32).to_le_bytes());
        b.extend_from_slice(&OFFER_VERSION.to_le_bytes());
        b.extend_from_slice(&self.boot_id);
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.fd.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        b.extend_from_slice(&self.token);
        b
    }

    /// Decodes an offer body (what follows magic and length); [`ShmError::Invalid`]
    /// for another length or version.
    pub fn decode(b: &[u8]) -> Result<Offer, ShmError> {
        if b.len() != OFFER_LEN {
            return Err(ShmError::Invalid(format!(
                "shared-memory offer of {} bytes (want {OFFER_LEN})",
                b.len()
            )));
        }
        let version = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
        if version != OFFER_VERSION {
            return Err(ShmError::Invalid(format!(
                "shared-memory offer version {version} (want {OFFER_VERSION})"
            )));
        }
        Ok(Offer {
            boot_id: b[4..40].try_into().expect("36 bytes"),
            pid: u32::from_le_bytes(b[40..44].try_into().expect("4 bytes")),
            fd: u32::from_le_bytes(b[44..48].try_into().expect("4 bytes")),
            size: u64::from_le_bytes(b[48..56].try_into().expect("8 bytes")),
            token: b[56..72].try_into().expect("16 bytes"),
        })
    }
}

/// A frame length for the message header: with `shm`, marked as a descriptor.
pub fn mark(len: u64, shm: bool) -> u64 {
    if shm {
        len | SHM_BIT
    } else {
        len
    }
}

/// Clears the marks in a message header's frame lengths; returns which frames were
/// marked (bit i = frame i; marks past frame 127 are cleared and not reported, which
/// the message limits make impossible: at most 65 frames).
pub fn unmark(lens: &mut [u64]) -> u128 {
    let mut marks = 0u128;
    for (i, l) in lens.iter_mut().enumerate() {
        if *l & SHM_BIT != 0 {
            *l &= !SHM_BIT;
            if i < 128 {
                marks |= 1 << i;
            }
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_page_aligned_and_bounded() {
        let l = Layout::new(MIN_REGION).unwrap();
        assert_eq!(l.slots, 256);
        assert_eq!(l.data_offset, PAGE);
        assert_eq!(l.data_len, MIN_REGION - PAGE);
        let big = Layout::new(MAX_REGION).unwrap();
        assert_eq!(big.slots, MAX_SLOTS);
        assert_eq!(big.data_offset % PAGE, 0);
        assert!(big.data_offset >= FLAGS_OFFSET + 4 * MAX_SLOTS as u64);
        for bad in [0, PAGE, MIN_REGION + 1, MAX_REGION + PAGE] {
            assert!(Layout::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptors_round_trip_and_bad_ones_are_named() {
        let l = Layout::new(MIN_REGION).unwrap();
        let d = Descriptor {
            slot: 3,
            offset: PAGE,
            len: 100,
        };
        assert_eq!(Descriptor::decode(&d.encode(), &l), Ok(d));
        let last = Descriptor {
            slot: l.slots - 1,
            offset: 0,
            len: l.data_len,
        };
        assert_eq!(Descriptor::decode(&last.encode(), &l), Ok(last));
        let dec = |d: Descriptor| Descriptor::decode(&d.encode(), &l);
        assert_eq!(
            dec(Descriptor { slot: l.slots, ..d }),
            Err(DescError::Slot(l.slots, l.slots))
        );
        assert_eq!(dec(Descriptor { len: 0, ..d }), Err(DescError::Empty));
        assert!(matches!(
            dec(Descriptor {
                offset: l.data_len,
                len: 1,
                ..d
            }),
            Err(DescError::OutOfRange { .. })
        ));
        assert!(matches!(
            dec(Descriptor {
                offset: u64::MAX,
                len: 2,
                ..d
            }),
            Err(DescError::OutOfRange { .. })
        ));
        assert!(matches!(
            dec(Descriptor {
                offset: 0,
                len: l.data_len + 1,
                ..d
            }),
            Err(DescError::OutOfRange { .. })
        ));
        let mut reserved = d.encode();
        reserved[5] = 1;
        assert_eq!(Descriptor::decode(&reserved, &l), Err(DescError::Reserved(0x100)));
        assert_eq!(Descriptor::decode(&[0; 23], &l), Err(DescError::Length(23)));
        assert!(DescError::OutOfRange {
            offset: 1,
            len: 2,
            data_len: 3
        }
        .to_string()
        .contains("outside"));
    }

    #[test]
    fn offers_round_trip_and_garbage_is_refused() {
        let o = Offer {
            boot_id: [b'a'; 36],
            pid: 42,
            fd: 7,
            size: 1 << 27,
            token: [9; 16],
        };
        let wire = o.encode();
        assert_eq!(u32::from_le_bytes(wire[..4].try_into().unwrap()), OFFER_MAGIC);
        assert_eq!(u32::from_le_bytes(wire[4..8].try_into().unwrap()) as usize, OFFER_LEN);
        assert_eq!(Offer::decode(&wire[8..]), Ok(o));
        assert!(Offer::decode(&wire[8..70]).is_err());
        let mut v2 = wire[8..].to_vec();
        v2[0] = 2;
        assert_eq!(
            Offer::decode(&v2),
            Err(ShmError::Invalid(format!(
                "shared-memory offer version 2 (want {OFFER_VERSION})"
            )))
        );
    }

    #[test]
    fn marks_survive_the_header() {
        let mut lens = [mark(10, false), mark(24, true), 5, mark(24, true)];
        assert_eq!(unmark(&mut lens), 0b1010);
        assert_eq!(lens, [10, 24, 5, 24]);
        let mut plain = [1u64, 2, 3];
        assert_eq!(unmark(&mut plain), 0);
    }

    proptest::proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100)) {
            let l = Layout::new(MIN_REGION).unwrap();
            if let Ok(d) = Descriptor::decode(&b, &l) {
                proptest::prop_assert!(d.offset + d.len <= l.data_len && d.slot < l.slots);
            }
            let _ = Offer::decode(&b);
        }
    }
}
