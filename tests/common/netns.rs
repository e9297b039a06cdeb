//! Network namespaces as hosts: `n` namespaces, each with one veth (`eth0`, address
//! `10.77.0.(i+1)/24`, IPv6 `fd77::(i+1)/64`) plugged into a bridge that lives in a
//! namespace of its own, so nothing is added to the host's own network. Links are
//! cut, healed or made lossy with nftables rules inside a namespace. Everything is
//! removed on drop. Partitions between groups of namespaces are rules of the bridge
//! (one nftables transaction, so every link is cut or healed at once). Needs root
//! (CAP_NET_ADMIN), `ip` (iproute2) and `nft` (nftables).
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

impl Net {
    /// Replaces the bridge's rules with `rules` (nft statements of the forward chain;
    /// none: every frame passes), in one transaction: a partition starts or ends for
    /// every link at once.
    fn bridge_rules(&self, rules: &[String]) -> Result<(), String> {
        let mut script = String::from("table bridge psrs {}\ndelete table bridge psrs\n");
        if !rules.is_empty() {
            script += "table bridge psrs {\n  chain cut {\n    type filter hook forward priority 0; policy accept;\n";
            for r in rules {
                script += &format!("    {r}\n");
            }
            script += "  }\n}\n";
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.switch(), "nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("ip netns exec ... nft: {e}"))?;
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(script.as_bytes())
            .map_err(|e| e.to_string())?;
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "nft -f in {}: {}\n{script}",
                self.switch(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    fn ports(ids: &[usize]) -> String {
        let names: Vec<String> = ids.iter().map(|i| format!("\"p{i}\"")).collect();
        format!("{{ {} }}", names.join(", "))
    }

    /// Splits the namespaces into `groups` at the bridge, in one step: no frame
    /// crosses between two groups (each namespace in exactly one group); a
    /// namespace in no group talks to every other.
    pub fn partition(&self, groups: &[&[usize]]) -> Result<(), String> {
        let mut rules = Vec::new();
        for (a, ga) in groups.iter().enumerate() {
            for (b, gb) in groups.iter().enumerate() {
                if a != b && !ga.is_empty() && !gb.is_empty() {
                    rules.push(format!("iifname {} oifname {} drop", Net::ports(ga), Net::ports(gb)));
                }
            }
        }
        self.bridge_rules(&rules)
    }

    /// Drops every frame namespace `from` sends to another namespace, at the bridge;
    /// what the others send to it still arrives (one-way loss).
    pub fn drop_from(&self, from: usize) -> Result<(), String> {
        self.bridge_rules(&[format!("iifname \"p{from}\" drop")])
    }

    /// Removes every rule of [`Net::partition`] and [`Net::drop_from`].
    pub fn heal_bridge(&self) -> Result<(), String> {
        self.bridge_rules(&[])
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
