//! `psrs certs`: the cluster's certificates. `init --dir D` makes a CA and one
//! certificate per role (scheduler, server, worker, client); `issue --role R` signs
//! one more with that CA. Give a node its files with `PS_TLS_CA=D/ca.pem`,
//! `PS_TLS_CERT=D/ROLE.pem`, `PS_TLS_KEY=D/ROLE-key.pem`; keep `ca-key.pem` off the
//! cluster's machines.

use clap::{Args as ClapArgs, Subcommand};
use ps_core::tls::bundle::{self, File, CA_CERT, CA_KEY};
use ps_core::tls::issue::Ca;
use ps_core::tls::CertRole;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `psrs certs`.
#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make a cluster CA and a certificate and key for every role in a directory.
    Init {
        /// The directory (made if missing).
        #[arg(long)]
        dir: PathBuf,
        /// Days the CA and certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// A host name or IP address the certificates are also valid for (HTTPS
        /// clients that check names, e.g. a browser); repeat for several.
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Replace files that exist.
        #[arg(long)]
        force: bool,
    },
    /// Issue one more certificate with the CA in a directory made by `init`.
    Issue {
        /// The role it names: scheduler, server, worker or client.
        #[arg(long)]
        role: String,
        /// The directory holding ca.pem and ca-key.pem.
        #[arg(long)]
        dir: PathBuf,
        /// The files' name: NAME.pem and NAME-key.pem in the directory (default: the
        /// role followed by a number not taken yet, e.g. worker-2).
        #[arg(long)]
        name: Option<String>,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// A host name or IP address it is also valid for; repeat for several.
        #[arg(long = "host")]
        hosts: Vec<String>,
    },
}

/// Runs `psrs certs`.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    crate::logging::set_role("certs");
    match a.cmd {
        Cmd::Init {
            dir,
            days,
            hosts,
            force,
        } => {
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make '{}': {e}", dir.display()))?;
            let files = bundle::init(days, &hosts).map_err(|e| e.to_string())?;
            if !force {
                if let Some(f) = files.iter().find(|f| dir.join(&f.name).exists()) {
                    return Err(format!(
                        "'{}' exists; pass --force to replace the cluster's certificates",
                        dir.join(&f.name).display()
                    )
                    .into());
                }
            }
            write_all(&dir, &files)?;
            println!(
                "wrote a CA and certificates for scheduler, server, worker and client to {} (valid {days} days); keep {CA_KEY} off the cluster's machines",
                dir.display()
            );
            Ok(())
        }
        Cmd::Issue {
            role,
            dir,
            name,
            days,
            hosts,
        } => {
            let r = CertRole::parse(&role)
                .ok_or_else(|| format!("--role '{role}' is not scheduler, server, worker or client"))?;
            // the CA's key must be its owner's alone, as ssh asks of a private key
            let read = |n: &str, private: bool| {
                let p = dir.join(n);
                let path = p.display().to_string();
                let bytes = match private {
                    true => ps_core::auth::private_file::read(&path),
                    false => std::fs::read(&p),
                };
                bytes
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .map_err(|e| format!("cannot read '{path}': {e}"))
            };
            let ca = Ca::from_pem(&read(CA_CERT, false)?, &read(CA_KEY, true)?).map_err(|e| e.to_string())?;
            let name = match name {
                Some(n) => n,
                None => (2..)
                    .map(|i| format!("{r}-{i}"))
                    .find(|n| !dir.join(format!("{n}.pem")).exists())
                    .expect("a free name"),
            };
            let files = bundle::issue(&ca, r, &name, days, &hosts).map_err(|e| e.to_string())?;
            if let Some(f) = files.iter().find(|f| dir.join(&f.name).exists()) {
                return Err(format!("'{}' exists; choose another --name", dir.join(&f.name).display()).into());
            }
            write_all(&dir, &files)?;
            println!(
                "wrote {} and {} (role {r}, valid {days} days)",
                dir.join(&files[0].name).display(),
                dir.join(&files[1].name).display()
            );
            Ok(())
        }
    }
}

fn write_all(dir: &Path, files: &[File]) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    for f in files {
        let p = dir.join(&f.name);
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        o.mode(if f.private { 0o600 } else { 0o644 });
        let mut file = o.open(&p).map_err(|e| format!("cannot write '{}': {e}", p.display()))?;
        file.write_all(f.text.as_bytes())
            .map_err(|e| format!("cannot write '{}': {e}", p.display()))?;
        // a replaced file keeps its old mode otherwise
        let mode = std::os::unix::fs::PermissionsExt::from_mode(if f.private { 0o600 } else { 0o644 });
        std::fs::set_permissions(&p, mode).map_err(|e| format!("cannot set the mode of '{}': {e}", p.display()))?;
    }
    Ok(())
}
