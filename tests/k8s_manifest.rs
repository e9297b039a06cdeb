//! deploy/k8s/psrs.yaml: every variable it sets is one psrs reads, each role's
//! StatefulSet sets its own DMLC_ROLE, the counts match the replica counts, and the
//! scheduler's address is the Service's name and port.

use std::collections::{BTreeMap, BTreeSet};
use yaml_rust2::{Yaml, YamlLoader};

const MANIFEST: &str = include_str!("../deploy/k8s/psrs.yaml");
const CONFIG: &str = include_str!("../ps-core/src/config.rs");
const ADDR: &str = include_str!("../ps-core/src/addr/mod.rs");

/// Every `DMLC_*` name quoted in psrs's config reader.
fn variables_psrs_reads() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for src in [CONFIG, ADDR] {
        for piece in src.split('"').skip(1).step_by(2) {
            if piece.starts_with("DMLC_") && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                out.insert(piece.to_string());
            }
        }
    }
    out
}

fn env_of(doc: &Yaml) -> BTreeMap<String, Yaml> {
    let c = &doc["spec"]["template"]["spec"]["containers"][0];
    c["env"]
        .as_vec()
        .expect("env list")
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

fn value(e: &BTreeMap<String, Yaml>, k: &str) -> String {
    e[k]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{k} has a literal value"))
        .to_string()
}

#[test]
fn the_manifest_sets_what_psrs_reads_consistently() {
    let docs = YamlLoader::load_from_str(MANIFEST).unwrap();
    let reads = variables_psrs_reads();
    assert!(
        reads.contains("DMLC_NUM_SERVER") && reads.contains("DMLC_NODE_HOST"),
        "{reads:?}"
    );
    let service = docs.iter().find(|d| d["kind"].as_str() == Some("Service")).unwrap();
    let svc_name = service["metadata"]["name"].as_str().unwrap();
    let svc_port = service["spec"]["ports"][0]["port"].as_i64().unwrap();
    let sets: Vec<&Yaml> = docs
        .iter()
        .filter(|d| d["kind"].as_str() == Some("StatefulSet"))
        .collect();
    assert_eq!(sets.len(), 3);
    let replicas = |role: &str| {
        sets.iter()
            .find(|d| value(&env_of(d), "DMLC_ROLE") == role)
            .unwrap_or_else(|| panic!("no {role} StatefulSet"))["spec"]["replicas"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(replicas("scheduler"), 1);
    for d in &sets {
        let env = env_of(d);
        for k in env.keys() {
            assert!(reads.contains(k), "{k} is not a variable psrs reads ({reads:?})");
        }
        let role = value(&env, "DMLC_ROLE");
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["role"].as_str(),
            Some(role.as_str())
        );
        assert_eq!(value(&env, "DMLC_PS_ROOT_URI"), svc_name);
        assert_eq!(value(&env, "DMLC_PS_ROOT_PORT"), svc_port.to_string());
        assert_eq!(value(&env, "DMLC_NUM_SERVER"), replicas("server").to_string());
        assert_eq!(value(&env, "DMLC_NUM_WORKER"), replicas("worker").to_string());
        if role != "scheduler" {
            assert_eq!(
                env["DMLC_NODE_HOST"]["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
                Some("status.podIP")
            );
        }
    }
}
