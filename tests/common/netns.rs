//! Network namespaces as hosts: `n` namespaces, each with one veth (`eth0`, address
//! `10.77.0.(i+1)/24`, IPv6 `fd77::(i+1)/64`) plugged into a bridge that lives in a
//! namespace of its own, so nothing is added to the host's own network. Links are
//! cut, healed or made lossy with nftables rules inside a namespace. Everything is
//! removed on drop. Needs root (CAP_NET_ADMIN), `ip` (iproute2) and `nft` (nftables).
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A private network of namespaces joined by a bridge.
pub struct Net {
    prefix: String,
    n: usize,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

impl Net {
    /// Creates `n` namespaces on a bridge, or says why it cannot.
    pub fn create(n: usize) -> Result<Net, String> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!("psrs{}x{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let net = Net { prefix, n: 0 };
        let sw = net.switch();
        run(&["ip", "netns", "add", &sw])?;
        let mut net = net;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "add", "br0", "type", "bridge"])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "set", "br0", "up"])?;
        for i in 0..n {
            let ns = format!("{}n{i}", net.prefix);
            run(&["ip", "netns", "add", &ns])?;
            net.n = i + 1;
            let port = format!("p{i}");
            run(&[
                "ip", "link", "add", &port, "netns", &sw, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            run(&[
                "ip", "netns", "exec", &sw, "ip", "link", "set", &port, "master", "br0", "up",
            ])?;
            let v4 = format!("10.77.0.{}/24", i + 1);
            let v6 = format!("fd77::{}/64", i + 1);
            run(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &v4, "dev", "eth0"])?;
            run(&[
                "ip", "netns", "exec", &ns, "ip", "-6", "addr", "add", &v6, "dev", "eth0", "nodad",
            ])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "eth0", "up"])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn switch(&self) -> String {
        format!("{}sw", self.prefix)
    }

    /// The name of namespace `i`.
    pub fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    /// The IPv4 address of namespace `i`.
    pub fn ip(&self, i: usize) -> String {
        format!("10.77.0.{}", i + 1)
    }

    /// The IPv6 address of namespace `i`.
    pub fn ip6(&self, i: usize) -> String {
        format!("fd77::{}", i + 1)
    }

    /// The command prefix that runs a program inside namespace `i`.
    pub fn exec_prefix(&self, i: usize) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.ns(i)]
    }

    fn nft(&self, i: usize, script: &str) -> Result<(), String> {
        let ns = self.ns(i);
        run(&["ip", "netns", "exec", &ns, "nft", script])
    }

    fn rules(&self, i: usize, verdict: &str) -> Result<(), String> {
        self.heal(i)?;
        self.nft(i, "add table inet psrs")?;
        self.nft(
            i,
            "add chain inet psrs in { type filter hook input priority 0; policy accept; }",
        )?;
        self.nft(
            i,
            "add chain inet psrs out { type filter hook output priority 0; policy accept; }",
        )?;
        self.nft(i, &format!("add rule inet psrs in iifname eth0 {verdict}"))?;
        self.nft(i, &format!("add rule inet psrs out oifname eth0 {verdict}"))
    }

    /// Drops every packet into and out of namespace `i` (it is cut off).
    pub fn cut(&self, i: usize) -> Result<(), String> {
        self.rules(i, "drop")
    }

    /// Drops `percent`% of the packets into and out of namespace `i`, at random.
    pub fn lossy(&self, i: usize, percent: u32) -> Result<(), String> {
        self.rules(i, &format!("numgen random mod 100 < {percent} drop"))
    }

    /// Removes the rules of namespace `i`.
    pub fn heal(&self, i: usize) -> Result<(), String> {
        let ns = self.ns(i);
        let _ = run(&["ip", "netns", "exec", &ns, "nft", "delete table inet psrs"]);
        Ok(())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for i in 0..self.n {
            let _ = run(&["ip", "netns", "del", &self.ns(i)]);
        }
        let _ = run(&["ip", "netns", "del", &self.switch()]);
    }
}
