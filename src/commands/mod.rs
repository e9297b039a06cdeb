//! The subcommands of `psrs`.

pub mod barrier;
pub mod api_client;
pub mod bench;
pub mod bench_api;
pub mod certs;
pub mod cluster;
pub mod connection;
pub mod convert;
pub mod error;
pub mod eval;
pub mod job;
pub mod kv;
pub mod simple;
pub mod simulate;
pub mod train;

use error::CliError;
use ps_core::{Config, Postoffice};
use std::sync::Arc;

/// Reads the node configuration from the environment, sets up logging, creates the
/// postoffice and joins the cluster (with the start barrier).
pub fn start_node() -> Result<Arc<Postoffice>, CliError> {
    join(read_config()?)
}

/// Reads the node configuration from the environment once and sets up logging (an
/// error names the variable, and the role when it is known).
pub fn read_config() -> Result<Config, CliError> {
    let cfg = Config::from_env().inspect_err(|e| {
        if let Some(r) = e.role {
            crate::logging::set_role(&r.to_string());
        }
    })?;
    crate::logging::init(&cfg.role.to_string(), cfg.log_level());
    Ok(cfg)
}

/// The HTTP API's options of a scheduler: `--insecure`, `--api-host`, a token made at
/// start kept in `work_dir` and published in the user's runtime directory
/// (`$XDG_RUNTIME_DIR/psrs`, else `~/.local/share/psrs/runtime`) for `psrs job`.
pub fn http_options(insecure: bool, hosts: Vec<String>, work_dir: &std::path::Path) -> ps_apps::stats::HttpOptions {
    ps_apps::stats::HttpOptions {
        insecure,
        hosts,
        token_dir: Some(work_dir.to_path_buf()),
        runtime: ps_apps::stats::RuntimeDir::from_vars(|k| std::env::var(k).ok()),
    }
}

/// Creates the postoffice for `cfg` and joins the cluster (with the start barrier).
pub fn join(cfg: Config) -> Result<Arc<Postoffice>, CliError> {
    let po = Postoffice::new(cfg)?;
    po.on_evicted(exit_evicted);
    with_lock_service(&po)?;
    po.start(true)?;
    Ok(po)
}

/// Ends the process with [`EXIT_EVICTED`](ps_core::postoffice::EXIT_EVICTED): the
/// scheduler declared it dead or refused it, so its work went to others.
pub fn exit_evicted(reason: &str) {
    let code = ps_core::postoffice::EXIT_EVICTED;
    log::error!("stopping this process (exit status {code}): {reason}");
    std::process::exit(code);
}

/// A scheduler with `PS_ELECTION=etcd` gets its etcd lock service (feature `etcd`); a
/// psrs built without it fails at start with a line naming the feature.
fn with_lock_service(po: &Arc<Postoffice>) -> Result<(), CliError> {
    let cfg = po.config();
    if let (ps_core::node::Role::Scheduler, ps_core::config::ElectionMode::Etcd { endpoints, prefix }) =
        (cfg.role, &cfg.election)
    {
        #[cfg(feature = "etcd")]
        {
            let ls = ps_core::failover::etcd::EtcdElection::connect(endpoints, prefix, cfg.heartbeat_timeout)?;
            po.van().set_lock_service(Arc::new(ls));
        }
        #[cfg(not(feature = "etcd"))]
        let _ = (endpoints, prefix);
    }
    Ok(())
}
