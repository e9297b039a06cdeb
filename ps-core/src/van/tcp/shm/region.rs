//! The mappings: the sender's region (a sealed memfd it creates and writes) and the
//! receiver's view of it (opened through `/proc/<pid>/fd/<fd>`), and the owner that
//! turns a span into a zero-copy [`Bytes`] whose drop clears the span's release flag.
//!
//! Safety: the mapped memory is shared with one other process (the link's peer, the
//! same user on the same host). The receiver only reads the data area and only writes
//! release flags (atomics); the sender writes a span only while the allocator holds it
//! (flag set, not yet cleared by the receiver). The memfd is sealed against shrinking,
//! and a receiver refuses an unsealed file, so no access can fault (SIGBUS) on a
//! truncated file.

use super::error::ShmError;
use super::wire::{Descriptor, Layout, Offer, FLAGS_OFFSET, IN_USE, REGION_MAGIC, RELEASED};
use bytes::Bytes;
use memfd::{FileSeal, Memfd, MemfdOptions};
use memmap2::MmapRaw;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A mapped region (either side).
pub struct Region {
    map: MmapRaw,
    layout: Layout,
}

impl Region {
    /// Creates a sealed memfd of `layout.total` bytes, maps it and writes the header
    /// (magic, `token`). Returns the region and the memfd, which must stay open until
    /// the peer answered the offer.
    pub fn create(layout: Layout, token: [u8; 16]) -> std::io::Result<(Region, Memfd)> {
        let io = |e: memfd::Error| std::io::Error::other(e.to_string());
        let fd = MemfdOptions::default()
            .close_on_exec(true)
            .allow_sealing(true)
            .create("psrs-shm")
            .map_err(io)?;
        fd.as_file().set_len(layout.total)?;
        fd.add_seals(&[FileSeal::SealShrink, FileSeal::SealGrow]).map_err(io)?;
        fd.add_seal(FileSeal::SealSeal).map_err(io)?;
        let map = MmapRaw::map_raw(fd.as_file())?;
        let r = Region { map, layout };
        // SAFETY: the header lies within the mapping (layout.total >= one page).
        unsafe {
            let p = r.map.as_mut_ptr();
            std::ptr::copy_nonoverlapping(REGION_MAGIC.as_ptr(), p, 8);
            std::ptr::copy_nonoverlapping(token.as_ptr(), p.add(8), 16);
        }
        Ok((r, fd))
    }

    /// Maps the region `offer` names: opens `/proc/<pid>/fd/<fd>` (a regular file
    /// only, so a FIFO or device is never opened), checks it is a memfd sealed against
    /// shrinking of exactly the offered size, maps it and checks magic and token. A file
    /// that is not that region is [`ShmError::Refused`]; one that cannot be inspected
    /// or mapped [`ShmError::Io`].
    pub fn open(offer: &Offer) -> Result<Region, ShmError> {
        let layout = Layout::new(offer.size)?;
        let path = format!("/proc/{}/fd/{}", offer.pid, offer.fd);
        let io = |e: &dyn std::fmt::Display| ShmError::Io(format!("{path}: {e}"));
        let meta = std::fs::metadata(&path).map_err(|e| io(&e))?;
        let ft = meta.file_type();
        if !ft.is_file() || ft.is_fifo() || ft.is_char_device() || ft.is_block_device() {
            return Err(ShmError::Refused(format!("{path} is not a regular file")));
        }
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| io(&e))?;
        let fd = Memfd::try_from_file(file).map_err(|_| ShmError::Refused(format!("{path} is not a memfd")))?;
        let seals = fd.seals().map_err(|e| io(&e))?;
        if !seals.contains(&FileSeal::SealShrink) {
            return Err(ShmError::Refused(format!("{path} is not sealed against shrinking")));
        }
        let len = fd.as_file().metadata().map_err(|e| ShmError::Io(e.to_string()))?.len();
        if len != offer.size {
            return Err(ShmError::Refused(format!(
                "{path} has {len} bytes, the offer says {}",
                offer.size
            )));
        }
        let map = MmapRaw::map_raw(fd.as_file()).map_err(|e| ShmError::Io(format!("cannot map {path}: {e}")))?;
        let r = Region { map, layout };
        let mut head = [0u8; 24];
        // SAFETY: 24 bytes within the mapping, which is at least one page.
        unsafe { std::ptr::copy_nonoverlapping(r.map.as_ptr(), head.as_mut_ptr(), 24) };
        if head[..8] != REGION_MAGIC || head[8..] != offer.token {
            return Err(ShmError::Refused(format!(
                "{path} is not the region offered (magic or token differ)"
            )));
        }
        Ok(r)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The release flag of `slot` (< `layout.slots`).
    pub fn flag(&self, slot: u32) -> &AtomicU32 {
        assert!(slot < self.layout.slots, "slot {slot} out of range");
        // SAFETY: in the mapping (FLAGS_OFFSET + 4 * slots <= data_offset <= total),
        // 4-aligned (page-aligned base), and only ever accessed atomically.
        unsafe { &*(self.map.as_ptr().add((FLAGS_OFFSET + 4 * slot as u64) as usize) as *const AtomicU32) }
    }

    /// Copies `data` to `offset` in the data area and marks `slot` in use (sender).
    /// The span must be held by the caller's allocator under `slot`.
    pub fn fill(&self, slot: u32, offset: u64, data: &[u8]) {
        let end = offset.checked_add(data.len() as u64).expect("span end");
        assert!(end <= self.layout.data_len, "span outside the data area");
        self.flag(slot).store(IN_USE, Ordering::Relaxed);
        // SAFETY: within the data area (checked above); the span is not being read by
        // the receiver (its flag was released, or never lent).
        unsafe {
            let dst = self.map.as_mut_ptr().add((self.layout.data_offset + offset) as usize);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
        }
    }

    /// True if the receiver released `slot` (or it was never lent).
    pub fn released(&self, slot: u32) -> bool {
        self.flag(slot).load(Ordering::Acquire) == RELEASED
    }

    /// The span `d` (validated against this region's layout) as zero-copy bytes that
    /// release the slot when the last clone is dropped (receiver).
    pub fn span(self: &Arc<Self>, d: Descriptor) -> Bytes {
        Bytes::from_owner(Span {
            region: Arc::clone(self),
            d,
        })
    }
}

/// A span lent by the sender, owned by the `Bytes` handed up the stack.
struct Span {
    region: Arc<Region>,
    d: Descriptor,
}

impl AsRef<[u8]> for Span {
    fn as_ref(&self) -> &[u8] {
        let l = self.region.layout();
        debug_assert!(self.d.offset + self.d.len <= l.data_len);
        // SAFETY: the descriptor was validated against the layout (inside the data
        // area); the sender does not write the span until its flag is released.
        unsafe {
            std::slice::from_raw_parts(
                self.region.map.as_ptr().add((l.data_offset + self.d.offset) as usize),
                self.d.len as usize,
            )
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.region.flag(self.d.slot).store(RELEASED, Ordering::Release);
    }
}

/// This host's boot id (`/proc/sys/kernel/random/boot_id`), if readable.
pub fn boot_id() -> Option<[u8; 36]> {
    let s = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    s.trim().as_bytes().try_into().ok()
}
