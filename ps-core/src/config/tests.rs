//! Tests of [`super::Config`]: reading, validation, errors naming the variable.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", "9000"),
        ("DMLC_NUM_SERVER", "2"),
        ("DMLC_NUM_WORKER", "3"),
    ]
}

#[test]
fn reads_a_full_config() {
    let mut b = base();
    b.extend([
        ("PS_RESEND", "1"),
        ("PS_RESEND_TIMEOUT", "250"),
        ("PS_HEARTBEAT_INTERVAL", "0.5"),
        ("PS_HEARTBEAT_TIMEOUT", "2"),
        ("PS_DROP_MSG", "20"),
        ("PORT", "7001"),
    ]);
    let c = Config::from_vars(&vars(&b)).unwrap();
    assert_eq!(c.role, Role::Worker);
    assert_eq!((c.num_servers, c.num_workers), (2, 3));
    assert_eq!(c.resend_timeout, Some(Duration::from_millis(250)));
    assert_eq!(c.heartbeat_interval, Duration::from_millis(500));
    assert_eq!(c.drop_msg_percent, 20);
    assert_eq!(c.port, 7001);
    assert_eq!(c.node_host, "127.0.0.1");
}

#[test]
fn errors_name_the_variable() {
    let cases: Vec<(&str, Option<&str>)> = vec![
        ("DMLC_ROLE", None),
        ("DMLC_ROLE", Some("boss")),
        ("DMLC_PS_ROOT_PORT", Some("http")),
        ("DMLC_PS_ROOT_PORT", Some("70000")),
        ("DMLC_NUM_WORKER", Some("-1")),
        ("DMLC_PS_ROOT_URI", None),
    ];
    for (var, val) in cases {
        let mut m = vars(&base());
        match val {
            None => {
                m.remove(var);
            }
            Some(v) => {
                m.insert(var.into(), v.into());
            }
        }
        let e = Config::from_vars(&m).unwrap_err();
        assert_eq!(e.var, var, "{e}");
        assert!(!e.to_string().contains('\n'));
    }
    let mut m = vars(&base());
    m.insert("PS_HEARTBEAT_INTERVAL".into(), "2".into());
    m.insert("PS_HEARTBEAT_TIMEOUT".into(), "1".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_HEARTBEAT_TIMEOUT");
    m = vars(&base());
    m.insert("PS_DROP_MSG".into(), "101".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_DROP_MSG");
    for var in ["DMLC_NUM_SERVER", "DMLC_NUM_WORKER"] {
        m = vars(&base());
        m.insert(var.into(), "20000".into());
        let e = Config::from_vars(&m).unwrap_err();
        assert_eq!(e.var, var, "{e}");
        assert!(e.to_string().contains("20000"), "{e}");
    }
}

#[test]
fn replicas_need_enough_servers() {
    assert_eq!(Config::from_vars(&vars(&base())).unwrap().replicas, 0);
    let mut m = vars(&base());
    m.insert("PS_REPLICAS".into(), "1".into());
    assert_eq!(Config::from_vars(&m).unwrap().replicas, 1);
    m.insert("PS_REPLICAS".into(), "2".into()); // 2 servers hold at most 1 copy more
    let e = Config::from_vars(&m).unwrap_err();
    assert_eq!(e.var, "PS_REPLICAS");
    assert!(e.to_string().contains("need at least 3 servers"), "{e}");
    m.insert("PS_REPLICAS".into(), "many".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_REPLICAS");
}

#[test]
fn spin_is_off_by_default_and_bounded() {
    assert!(Config::from_vars(&vars(&base())).unwrap().spin.is_zero());
    let mut m = vars(&base());
    m.insert("DMLC_PS_VAN_TYPE".into(), "tcp".into());
    m.insert("PS_SPIN_US".into(), "50".into());
    assert_eq!(Config::from_vars(&m).unwrap().spin, Duration::from_micros(50));
    m.insert("DMLC_PS_VAN_TYPE".into(), "zmq".into());
    let e = Config::from_vars(&m).unwrap_err();
    assert_eq!(e.var, "PS_SPIN_US");
    assert!(e.to_string().contains("only the TCP van spins"), "{e}");
    m.insert("DMLC_PS_VAN_TYPE".into(), "tcp".into());
    m.insert("PS_SPIN_US".into(), "20000".into());
    let e = Config::from_vars(&m).unwrap_err();
    assert_eq!(e.var, "PS_SPIN_US");
    assert!(e.to_string().contains("above 10000"), "{e}");
    m.insert("PS_SPIN_US".into(), "-1".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_SPIN_US");
}

#[test]
fn shared_memory_is_on_by_default_and_bounded() {
    let c = Config::from_vars(&vars(&base())).unwrap();
    assert_eq!(c.shm, ShmConfig::default());
    assert!(c.shm.enabled);
    let mut m = vars(&base());
    m.insert("PS_SHM".into(), "0".into());
    m.insert("PS_SHM_MB".into(), "16".into());
    m.insert("PS_SHM_MIN_BYTES".into(), "4096".into());
    let c = Config::from_vars(&m).unwrap();
    assert!(!c.shm.enabled);
    assert_eq!((c.shm.region_bytes(), c.shm.min_bytes), (16 << 20, 4096));
    for (var, val, says) in [
        ("PS_SHM_MB", "0", "outside 1..=4096"),
        ("PS_SHM_MB", "5000", "outside 1..=4096"),
        ("PS_SHM_MB", "lots", "not a number of MiB"),
        ("PS_SHM_MIN_BYTES", "100", "outside 256.."),
        ("PS_SHM_MIN_BYTES", "20000000", "(the region, PS_SHM_MB)"),
        ("PS_SHM", "yes", "not 0 or 1"),
    ] {
        let mut m = m.clone();
        m.insert(var.into(), val.into());
        let e = Config::from_vars(&m).unwrap_err();
        assert_eq!(e.var, var);
        assert!(e.to_string().contains(says), "{e}");
    }
}

#[test]
fn elastic_workers_flag() {
    assert!(!Config::from_vars(&vars(&base())).unwrap().elastic_workers);
    let mut m = vars(&base());
    m.insert("PS_ELASTIC_WORKERS".into(), "1".into());
    assert!(Config::from_vars(&m).unwrap().elastic_workers);
    m.insert("PS_ELASTIC_WORKERS".into(), "yes".into());
    let e = Config::from_vars(&m).unwrap_err();
    assert_eq!(e.var, "PS_ELASTIC_WORKERS");
    assert!(e.to_string().contains("'yes' is not 0 or 1"), "{e}");
}

#[test]
fn scheduler_candidates() {
    let c = Config::from_vars(&vars(&base())).unwrap();
    assert_eq!(c.schedulers, vec![("127.0.0.1".to_string(), 9000)]);
    assert_eq!(c.scheduler_index(), Some(0));
    assert!(!c.scheduler_standby);
    let mut m = vars(&base());
    m.insert("DMLC_ROLE".into(), "scheduler".into());
    m.insert("DMLC_PS_ROOT_PORT".into(), "9001".into());
    m.insert("PS_SCHEDULERS".into(), "127.0.0.1:9000,127.0.0.1:9001".into());
    m.insert("PS_SCHEDULER_STANDBY".into(), "1".into());
    let c = Config::from_vars(&m).unwrap();
    assert_eq!((c.scheduler_index(), c.scheduler_standby), (Some(1), true));
    m.insert("DMLC_PS_ROOT_PORT".into(), "9002".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_SCHEDULERS");
    m.insert("PS_SCHEDULERS".into(), "127.0.0.1:9002".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_SCHEDULER_STANDBY");
    m.insert("PS_SCHEDULERS".into(), "127.0.0.1".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().var, "PS_SCHEDULERS");
}

#[test]
fn errors_carry_the_role_when_it_is_known() {
    let mut m = vars(&base());
    m.insert("DMLC_NUM_SERVER".into(), "many".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().role, Some(Role::Worker));
    m.insert("DMLC_ROLE".into(), "boss".into());
    assert_eq!(Config::from_vars(&m).unwrap_err().role, None);
}

#[test]
fn etcd_election_needs_two_schedulers_and_a_lease() {
    let mut b = base();
    b[0] = ("DMLC_ROLE", "scheduler");
    b.extend([("PS_ELECTION", "etcd"), ("PS_ETCD_ENDPOINTS", "http://127.0.0.1:2379")]);
    let e = Config::from_vars(&vars(&b)).unwrap_err();
    assert_eq!(e.var, "PS_ELECTION", "one scheduler: {e}");
    b.extend([
        ("PS_SCHEDULERS", "127.0.0.1:9000,127.0.0.1:9001"),
        ("PS_HEARTBEAT_TIMEOUT", "1"),
    ]);
    let c = Config::from_vars(&vars(&b)).unwrap();
    assert!(matches!(c.election, ElectionMode::Etcd { .. }));
    b.retain(|(k, _)| *k != "PS_ETCD_ENDPOINTS");
    assert_eq!(Config::from_vars(&vars(&b)).unwrap_err().var, "PS_ETCD_ENDPOINTS");
}

#[test]
fn the_default_van_is_tcp_and_zmq_stays_selectable() {
    assert_eq!(Config::from_vars(&vars(&base())).unwrap().van_type, "tcp");
    let mut m = vars(&base());
    m.insert("DMLC_PS_VAN_TYPE".into(), "zmq".into());
    assert_eq!(Config::from_vars(&m).unwrap().van_type, "zmq");
}
