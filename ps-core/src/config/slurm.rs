//! Roles from Slurm: when `DMLC_ROLE` is unset and `SLURM_PROCID` is set (a task of
//! `srun`), task 0 is the scheduler, the next `DMLC_NUM_SERVER` tasks are servers and
//! the rest workers; `DMLC_NUM_WORKER` defaults to the rest of `SLURM_NTASKS` and
//! `DMLC_PS_ROOT_URI` to the first host of `SLURM_JOB_NODELIST`. Pure: it only fills
//! in the missing variables of a map.

use super::error::{err, ConfigError};
use std::collections::HashMap;

/// The first host of a Slurm node list (`node[03-05,9],gpu1` → `node03`).
pub fn first_host(nodelist: &str) -> Option<String> {
    let s = nodelist.trim();
    let end = s.find(',').unwrap_or(s.len());
    let open = s.find('[');
    match open {
        Some(o) if o < end => {
            let close = s[o..].find(']')? + o;
            let first = s[o + 1..close].split([',', '-']).next()?;
            Some(format!("{}{}", &s[..o], first))
        }
        _ => Some(s[..end].to_string()).filter(|h| !h.is_empty()),
    }
}

/// Fills in `DMLC_ROLE`, `DMLC_NUM_WORKER` and `DMLC_PS_ROOT_URI` from the `SLURM_*`
/// variables when `DMLC_ROLE` is unset; a [`ConfigError`] naming the variable when the
/// Slurm variables do not fit.
pub fn fill_from_slurm(vars: &mut HashMap<String, String>) -> Result<(), ConfigError> {
    let get = |v: &HashMap<String, String>, k: &str| v.get(k).map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if get(vars, "DMLC_ROLE").is_some() {
        return Ok(());
    }
    let Some(procid) = get(vars, "SLURM_PROCID") else {
        return Ok(());
    };
    let bad = |k: &str, why: String| err(k, why);
    let procid: usize = procid
        .parse()
        .map_err(|_| bad("SLURM_PROCID", format!("'{procid}' is not a task number")))?;
    let ntasks: usize = get(vars, "SLURM_NTASKS")
        .ok_or_else(|| bad("SLURM_NTASKS", "not set (needed with SLURM_PROCID)".into()))?
        .parse()
        .map_err(|_| bad("SLURM_NTASKS", "not a number of tasks".into()))?;
    let servers: usize = get(vars, "DMLC_NUM_SERVER")
        .ok_or_else(|| bad("DMLC_NUM_SERVER", "not set; under Slurm set it to the number of servers (task 0 is the scheduler, the next tasks servers, the rest workers)".into()))?
        .parse()
        .map_err(|_| bad("DMLC_NUM_SERVER", "not a count of servers".into()))?;
    if ntasks < servers + 2 {
        return Err(bad(
            "SLURM_NTASKS",
            format!("{ntasks} tasks cannot hold a scheduler, {servers} servers and a worker"),
        ));
    }
    let role = match procid {
        0 => "scheduler",
        p if p <= servers => "server",
        _ => "worker",
    };
    vars.insert("DMLC_ROLE".into(), role.into());
    if get(vars, "DMLC_NUM_WORKER").is_none() {
        vars.insert("DMLC_NUM_WORKER".into(), (ntasks - 1 - servers).to_string());
    }
    if get(vars, "DMLC_PS_ROOT_URI").is_none() {
        if let Some(h) = get(vars, "SLURM_JOB_NODELIST").and_then(|l| first_host(&l)) {
            vars.insert("DMLC_PS_ROOT_URI".into(), h);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_host_of_node_lists() {
        assert_eq!(first_host("localhost").as_deref(), Some("localhost"));
        assert_eq!(first_host("node[03-05,9],gpu1").as_deref(), Some("node03"));
        assert_eq!(first_host("a1,b[1-2]").as_deref(), Some("a1"));
        assert_eq!(first_host("").as_deref(), None);
    }

    fn slurm(procid: &str) -> HashMap<String, String> {
        [
            ("SLURM_PROCID", procid),
            ("SLURM_NTASKS", "5"),
            ("SLURM_JOB_NODELIST", "n[1-3]"),
            ("DMLC_NUM_SERVER", "2"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn roles_follow_the_task_number() {
        let roles: Vec<String> = (0..5)
            .map(|p| {
                let mut v = slurm(&p.to_string());
                fill_from_slurm(&mut v).unwrap();
                assert_eq!(v["DMLC_NUM_WORKER"], "2");
                assert_eq!(v["DMLC_PS_ROOT_URI"], "n1");
                v["DMLC_ROLE"].clone()
            })
            .collect();
        assert_eq!(roles, ["scheduler", "server", "server", "worker", "worker"]);
        // DMLC_ROLE set: untouched
        let mut v = slurm("0");
        v.insert("DMLC_ROLE".into(), "worker".into());
        fill_from_slurm(&mut v).unwrap();
        assert_eq!(v["DMLC_ROLE"], "worker");
        // errors name the variable
        let mut v = slurm("0");
        v.remove("DMLC_NUM_SERVER");
        assert_eq!(fill_from_slurm(&mut v).unwrap_err().var, "DMLC_NUM_SERVER");
        let mut v = slurm("0");
        v.insert("SLURM_NTASKS".into(), "3".into());
        assert_eq!(fill_from_slurm(&mut v).unwrap_err().var, "SLURM_NTASKS");
    }
}
