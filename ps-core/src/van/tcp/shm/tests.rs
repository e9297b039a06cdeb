//! The shell on real sockets and memfds: two TCP transports in one process, and a
//! hostile peer that offers a region and sends bad descriptors.

use super::region::{boot_id, Region};
use super::wire::{mark, Descriptor, Layout, Offer, ACCEPT, DESC_LEN, REFUSE};
use crate::config::Security;
use crate::config::ShmConfig;
use crate::van::authz::Expect;
use crate::van::stats::ShmStats;
use crate::van::tcp::guard::Guard;
use crate::van::tcp::transport::TcpTransport;
use crate::van::transport::Transport;
use bytes::Bytes;
use crossbeam_channel::{unbounded, Receiver};
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

fn cfg(enabled: bool, mb: u64) -> ShmConfig {
    ShmConfig {
        enabled,
        region_mb: mb,
        min_bytes: 64 << 10,
    }
}

/// A started receiving transport on 127.0.0.1: its port, messages and counters.
fn receiver(shm: ShmConfig) -> (TcpTransport, u16, Receiver<Vec<Bytes>>, Arc<ShmStats>) {
    let t = TcpTransport::new().with_shm(&shm);
    let port = t.bind("127.0.0.1", 0).unwrap();
    let (tx, rx) = unbounded();
    t.start(Arc::new(move |f, _| tx.send(f).unwrap())).unwrap();
    let stats = t.shm_stats().unwrap();
    (t, port, rx, stats)
}

fn pattern(n: usize, seed: u8) -> Bytes {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn recv(rx: &Receiver<Vec<Bytes>>) -> Vec<Bytes> {
    rx.recv_timeout(Duration::from_secs(10)).expect("a message")
}

fn get(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(Relaxed)
}

#[test]
fn large_frames_go_through_shared_memory_and_fall_back_when_it_is_full() {
    if boot_id().is_none() {
        return; // no /proc: shared memory is off anyway
    }
    let (b, port, rx, b_stats) = receiver(cfg(true, 2));
    let a = TcpTransport::new().with_shm(&cfg(true, 2));
    a.connect(1, "127.0.0.1", port).unwrap();
    let a_stats = a.shm_stats().unwrap();
    let (small, big) = (Bytes::from_static(b"meta"), pattern(1 << 20, 1));
    // small messages only: no offer yet
    a.send(1, vec![small.clone(), pattern(1000, 0)]).unwrap();
    assert_eq!(recv(&rx), vec![small.clone(), pattern(1000, 0)]);
    assert_eq!((get(&a_stats.links_out), get(&b_stats.links_in)), (0, 0));
    assert_eq!(a.send(1, vec![small.clone(), big.clone()]).unwrap(), 4 + (1 << 20));
    let held = recv(&rx);
    assert_eq!(held, vec![small.clone(), big.clone()]);
    assert_eq!((get(&a_stats.links_out), get(&b_stats.links_in)), (1, 1));
    assert_eq!((get(&a_stats.sent_frames), get(&b_stats.recv_frames)), (1, 1));
    assert_eq!(get(&b_stats.recv_bytes), 1 << 20);
    // the receiver keeps the first frame: the 2 MiB region has no room for another
    let big2 = pattern(1 << 20, 2);
    a.send(1, vec![small.clone(), big2.clone()]).unwrap();
    assert_eq!(recv(&rx)[1], big2);
    assert_eq!((get(&a_stats.sent_frames), get(&a_stats.fallback_frames)), (1, 1));
    // released: the next frame takes the span back
    drop(held);
    let big3 = pattern(1 << 20, 3);
    a.send(1, vec![small, big3.clone()]).unwrap();
    assert_eq!(recv(&rx)[1], big3);
    assert_eq!((get(&a_stats.sent_frames), get(&b_stats.recv_frames)), (2, 2));
    assert_eq!(get(&b_stats.bad_messages), 0);
    a.close();
    b.close();
}

#[test]
fn off_on_either_side_means_plain_tcp() {
    for (sender_on, receiver_on) in [(false, true), (true, false)] {
        let (b, port, rx, b_stats) = receiver(cfg(receiver_on, 4));
        let a = TcpTransport::new().with_shm(&cfg(sender_on, 4));
        a.connect(1, "127.0.0.1", port).unwrap();
        let big = pattern(1 << 20, 9);
        a.send(1, vec![big.clone()]).unwrap();
        assert_eq!(recv(&rx), vec![big]);
        let a_stats = a.shm_stats().unwrap();
        assert_eq!(get(&a_stats.links_out) + get(&a_stats.sent_frames), 0);
        assert_eq!(get(&b_stats.links_in) + get(&b_stats.recv_frames), 0);
        a.close();
        b.close();
    }
}

/// Writes one message in the TCP van's format; frames listed in `marked` are
/// descriptors.
fn write_raw(s: &mut impl Write, frames: &[&[u8]], marked: &[usize]) {
    let mut m = Vec::new();
    m.extend_from_slice(b"PSRS");
    m.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        m.extend_from_slice(&mark(f.len() as u64, marked.contains(&i)).to_le_bytes());
    }
    for f in frames {
        m.extend_from_slice(f);
    }
    s.write_all(&m).unwrap();
    s.flush().unwrap();
}

/// A peer that handshakes and offers `offer` (with its own region's token unless
/// changed); returns the link and the answer byte.
fn offer(port: u16, offer: &Offer) -> (crate::van::tcp::guard::Outgoing, u8) {
    let guard = Guard::new(&Security::default().limits, None);
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut out = guard.connect(tcp, "test", &Expect::of_key(-70_001)).unwrap();
    out.write_all(&offer.encode()).unwrap();
    out.flush().unwrap();
    let answer = out.read_answer(Duration::from_secs(10)).unwrap();
    (out, answer)
}

#[test]
fn hostile_descriptors_are_dropped_and_the_link_goes_on() {
    let Some(boot) = boot_id() else { return };
    let (b, port, rx, b_stats) = receiver(cfg(true, 4));
    let layout = Layout::new(1 << 20).unwrap();
    let token = [5u8; 16];
    let (region, fd) = Region::create(layout, token).unwrap();
    let mine = Offer {
        boot_id: boot,
        pid: std::process::id(),
        fd: fd.as_file().as_raw_fd() as u32,
        size: layout.total,
        token,
    };
    let (mut out, answer) = offer(port, &mine);
    assert_eq!(answer, ACCEPT);
    let good = Descriptor {
        slot: 0,
        offset: 0,
        len: 1000,
    };
    region.fill(0, 0, &[7u8; 1000]);
    let bad = [
        Descriptor {
            slot: layout.slots,
            ..good
        }
        .encode()
        .to_vec(),
        Descriptor {
            offset: layout.data_len,
            ..good
        }
        .encode()
        .to_vec(),
        Descriptor {
            offset: u64::MAX - 10,
            len: 100,
            ..good
        }
        .encode()
        .to_vec(),
        Descriptor { len: 0, ..good }.encode().to_vec(),
        vec![0xff; DESC_LEN],
        vec![1, 2, 3],
    ];
    for d in &bad {
        write_raw(&mut out, &[b"meta", d], &[1]);
    }
    // a valid descriptor before a bad one in the same message is released with it
    write_raw(&mut out, &[&good.encode(), &bad[0]], &[0, 1]);
    write_raw(&mut out, &[b"sync"], &[]);
    assert_eq!(recv(&rx), vec![Bytes::from_static(b"sync")], "bad ones were dropped");
    assert!(region.released(0));
    region.fill(0, 0, &[7u8; 1000]);
    write_raw(&mut out, &[b"meta", &good.encode()], &[1]);
    write_raw(&mut out, &[b"plain"], &[]);
    let m = recv(&rx);
    assert_eq!((m[0].as_ref(), m[1].as_ref()), (&b"meta"[..], &[7u8; 1000][..]));
    assert!(!region.released(0), "held by the receiver");
    drop(m);
    assert!(region.released(0), "released on drop");
    assert_eq!(recv(&rx), vec![Bytes::from_static(b"plain")]);
    assert_eq!(get(&b_stats.bad_messages), bad.len() as u64 + 1);
    // a marked frame on a link without a region, and a second offer
    let guard = Guard::new(&Security::default().limits, None);
    let mut plain = guard
        .connect(
            TcpStream::connect(("127.0.0.1", port)).unwrap(),
            "test",
            &Expect::of_key(-70_001),
        )
        .unwrap();
    write_raw(&mut plain, &[&good.encode()], &[0]);
    write_raw(&mut plain, &[b"after"], &[]);
    assert_eq!(recv(&rx), vec![Bytes::from_static(b"after")]);
    assert_eq!(get(&b_stats.bad_messages), bad.len() as u64 + 2);
    out.write_all(&mine.encode()).unwrap();
    out.flush().unwrap();
    let again = out.read_answer(Duration::from_secs(10)).unwrap();
    assert_eq!(again, REFUSE, "one offer per link");
    assert!(rx.try_recv().is_err());
    drop(fd);
    b.close();
}

#[test]
fn offers_of_the_wrong_file_or_host_are_refused() {
    let Some(boot) = boot_id() else { return };
    let (b, port, _rx, b_stats) = receiver(cfg(true, 4));
    let layout = Layout::new(1 << 20).unwrap();
    let (_region, fd) = Region::create(layout, [1; 16]).unwrap();
    let good = Offer {
        boot_id: boot,
        pid: std::process::id(),
        fd: fd.as_file().as_raw_fd() as u32,
        size: layout.total,
        token: [1; 16],
    };
    let path = std::env::temp_dir().join(format!("psrs-shm-test-{}", std::process::id()));
    let plain_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    plain_file.set_len(1 << 20).unwrap();
    let not_memfd = plain_file.as_raw_fd() as u32;
    for (why, o) in [
        (
            "another host",
            Offer {
                boot_id: [b'x'; 36],
                ..good.clone()
            },
        ),
        (
            "wrong token",
            Offer {
                token: [2; 16],
                ..good.clone()
            },
        ),
        (
            "wrong size",
            Offer {
                size: 2 << 20,
                ..good.clone()
            },
        ),
        (
            "not a memfd",
            Offer {
                fd: not_memfd,
                ..good.clone()
            },
        ),
        (
            "no such fd",
            Offer {
                fd: 100_000,
                ..good.clone()
            },
        ),
        (
            "no such process",
            Offer {
                pid: u32::MAX - 1,
                ..good.clone()
            },
        ),
        (
            "bad size",
            Offer {
                size: 12345,
                ..good.clone()
            },
        ),
    ] {
        assert_eq!(offer(port, &o).1, REFUSE, "{why}");
    }
    assert_eq!(offer(port, &good).1, ACCEPT);
    assert_eq!(get(&b_stats.links_in), 1);
    b.close();
}
