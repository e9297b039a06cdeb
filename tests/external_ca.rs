//! Certificates from a CA the user already has: a CA made with the `openssl` CLI (not
//! `psrs certs`) issues node certificates carrying their role as psrs expects (a
//! subject alternative name URI `psrs://role/NAME`, extended key usages serverAuth
//! and clientAuth; the recipe in docs/security.md). A 1+1+2 cluster runs on them with
//! TLS on every link and sums exactly; a certificate of the same CA without a role,
//! or naming another role than the node's, is refused at the node's start with one
//! line, and the node exits non-zero.

mod common;

use common::Cluster;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `openssl ARGS` in `dir`; fails naming openssl when it is missing.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("this test needs the `openssl` command (apt package openssl): {e}"));
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `openssl req [FIRST] -new` with a new P-256 key written to `key`, the request (or
/// with `-x509` the certificate) to `out`, then `REST`.
fn new_key_req(dir: &Path, first: &[&str], key: &str, out: &str, rest: &[&str]) {
    let mut args = vec!["req"];
    args.extend(first);
    args.extend([
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        key,
        "-out",
        out,
    ]);
    args.extend(rest);
    openssl(dir, &args);
}

/// A site CA: a self-signed P-256 certificate `ca.pem` with its key `ca-key.pem`.
fn site_ca(dir: &Path) {
    std::fs::write(
        dir.join("ca.cnf"),
        "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = Site CA\n[v3_ca]\n\
         basicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n\
         subjectKeyIdentifier = hash\n",
    )
    .unwrap();
    new_key_req(
        dir,
        &["-x509"],
        "ca-key.pem",
        "ca.pem",
        &["-days", "30", "-config", "ca.cnf", "-extensions", "v3_ca"],
    );
}

/// Issues `NAME.pem` and `NAME-key.pem` from the site CA with subject alternative
/// names `san` (e.g. `URI:psrs://role/worker`).
fn issue(dir: &Path, name: &str, san: &str) {
    std::fs::write(
        dir.join(format!("{name}.ext")),
        format!(
            "basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\n\
             extendedKeyUsage = serverAuth, clientAuth\nsubjectAltName = {san}\n"
        ),
    )
    .unwrap();
    let (key, csr, pem, ext) = (
        format!("{name}-key.pem"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    let subj = format!("/CN={name}");
    new_key_req(dir, &[], &key, &csr, &["-subj", &subj]);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-set_serial",
            "0x1234",
            "-days",
            "30",
            "-out",
            &pem,
            "-extfile",
            &ext,
        ],
    );
}

/// The variables giving a node the certificate `name` of the site CA in `dir`.
fn vars(dir: &Path, name: &str) -> Vec<(&'static str, String)> {
    let p = |f: String| dir.join(f).display().to_string();
    vec![
        ("PS_TLS_CA", p("ca.pem".into())),
        ("PS_TLS_CERT", p(format!("{name}.pem"))),
        ("PS_TLS_KEY", p(format!("{name}-key.pem"))),
    ]
}

fn spawn(c: &mut Cluster, role: &str, args: &[&str], env: &[(&'static str, String)]) -> usize {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.spawn_with(role, args, &env)
}

#[test]
fn certificates_of_a_site_ca_run_a_cluster_and_one_without_a_role_is_refused() {
    let args = ["kv-test", "--keys", "1000", "--repeat", "30"];
    let mut c = Cluster::new(1, 2, &args, &[("DMLC_PS_VAN_TYPE", "tcp")], LIMIT);
    let ca = c.dir().join("site-ca");
    std::fs::create_dir(&ca).unwrap();
    site_ca(&ca);
    for role in ["scheduler", "server", "worker"] {
        issue(&ca, role, &format!("URI:psrs://role/{role}, DNS:{role}.psrs.example"));
    }
    issue(
        &ca,
        "norole",
        "DNS:worker.psrs.example, URI:https://psrs.example/worker",
    );

    // a node whose certificate names no role stops at once, with one line
    let bad = spawn(&mut c, "worker", &args, &vars(&ca, "norole"));
    c.wait_until("the node without a role to stop", |c| c.exited(bad));
    assert_ne!(c.procs[bad].status, Some(0), "{}", c.dump());
    let err = c.procs[bad].stderr();
    let last = err.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains("names no psrs role") && last.contains("PS_TLS_CERT"),
        "one line naming the variable and the missing role: {last}\n{}",
        c.dump()
    );

    // the site CA's worker certificate cannot start a server either
    let wrong = spawn(&mut c, "server", &args, &vars(&ca, "worker"));
    c.wait_until("the server with a worker's certificate to stop", |c| c.exited(wrong));
    assert_ne!(c.procs[wrong].status, Some(0), "{}", c.dump());
    let err = c.procs[wrong].stderr();
    let last = err.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains("names the role(s) worker, not server"),
        "{last}\n{}",
        c.dump()
    );

    spawn(&mut c, "scheduler", &args, &vars(&ca, "scheduler"));
    spawn(&mut c, "server", &args, &vars(&ca, "server"));
    spawn(&mut c, "worker", &args, &vars(&ca, "worker"));
    spawn(&mut c, "worker", &args, &vars(&ca, "worker"));
    c.procs.drain(bad..=wrong);
    c.wait_success();
    assert_eq!(c.all_stdout().matches("kv-test ok").count(), 2, "{}", c.dump());
    assert!(c.all_stdout().contains("= 60 x pushed"), "{}", c.dump());
    let sched = c.procs[0].stderr();
    assert!(
        !sched.contains("refused"),
        "nothing refused with the site CA's certificates\n{}",
        c.dump()
    );
}
