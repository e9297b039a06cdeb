//! Free ports for test clusters, out of the way of the ports the kernel hands out.

use std::fs;
use std::net::TcpListener;

/// A free TCP port on 127.0.0.1 (bound then released), picked at random *below* the
/// kernel's ephemeral range: every node binds its own port 0 and every outgoing
/// connection takes an ephemeral port, so a port from that range (what binding port 0
/// here would give) can be taken by a node of the same cluster before the process it
/// was meant for binds it. Never hands out the same port twice in one test binary.
pub fn free_port() -> u16 {
    use std::collections::hash_map::RandomState;
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let ephemeral_low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u32>().ok()))
        .unwrap_or(32768);
    let (low, high) = (10_000u32, ephemeral_low.min(65_535));
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    if high > low + 1000 {
        for _ in 0..200 {
            let mut h = RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            let port = (low + (h.finish() % u64::from(high - low)) as u32) as u16;
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return port;
            }
        }
    }
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    given.insert(port);
    port
}
