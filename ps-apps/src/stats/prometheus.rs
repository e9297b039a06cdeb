//! `/metrics`: a [`Snapshot`] in the OpenMetrics text format, built with the
//! `prometheus-client` crate (a registry of gauges and counters, rendered by its
//! encoder). Label values are escaped here (`\\`, `\"`, `\n`): the crate writes them as
//! given, and an address or a role is text from the outside.

use super::snapshot::Snapshot;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::fmt::Write;
use std::sync::atomic::AtomicU64;

/// The content type of [`to_prometheus`]'s text (OpenMetrics, which Prometheus asks
/// for first).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of [`to_text_format`]'s text (Prometheus's text format, what
/// clients that do not ask for OpenMetrics get, `promtool` included).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value, escaped as the exposition format wants it.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Text(String);

impl EncodeLabelValue for Text {
    fn encode(&self, enc: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => enc.write_str("\\\\")?,
                '"' => enc.write_str("\\\"")?,
                '\n' => enc.write_str("\\n")?,
                c => enc.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    id: Text,
    role: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SchedulerLabels {
    candidate: Text,
    addr: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: Text,
}

type F64 = Gauge<f64, AtomicU64>;

fn gauge(reg: &mut Registry, name: &str, help: &str, v: f64) {
    let g = F64::default();
    g.set(v);
    reg.register(name, help, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, v: u64) {
    let c: Counter = Counter::default();
    c.inc_by(v);
    reg.register(name, help, c);
}

/// Renders `s` in the OpenMetrics text format (names prefixed `psrs_`; counters end in
/// `_total`); absent values (no loss yet) are left out, not invented.
pub fn to_prometheus(s: &Snapshot) -> String {
    let mut reg = Registry::with_prefix("psrs");
    gauge(
        &mut reg,
        "uptime_seconds",
        "Seconds since the scheduler started",
        s.uptime_s,
    );
    let sc = &s.scheduler;
    let term = Family::<SchedulerLabels, F64>::default();
    term.get_or_create(&SchedulerLabels {
        candidate: Text(sc.candidate.to_string()),
        addr: Text(sc.addr.clone()),
    })
    .set(sc.term as f64);
    reg.register(
        "scheduler_term",
        "Term of the scheduler serving these metrics (bumped by every takeover); labels: its candidate index and address",
        term,
    );
    gauge(
        &mut reg,
        "scheduler_active",
        "1 if the scheduler serving these metrics is the active one",
        if sc.active { 1.0 } else { 0.0 },
    );
    let up = Family::<NodeLabels, F64>::default();
    let hb = Family::<NodeLabels, F64>::default();
    for n in &s.nodes {
        let l = NodeLabels {
            id: Text(n.id.to_string()),
            role: Text(n.role.clone()),
        };
        up.get_or_create(&l).set(if n.dead { 0.0 } else { 1.0 });
        if let Some(age) = n.heartbeat_age_ms {
            hb.get_or_create(&l).set(age as f64 / 1000.0);
        }
    }
    reg.register("node_up", "1 if the node is alive, 0 if declared dead", up);
    reg.register("heartbeat_age_seconds", "Seconds since the node's last heartbeat", hb);
    if let Some(q) = &s.queues {
        let tasks = Family::<QueueLabels, F64>::default();
        for (k, v) in [
            ("todo", q.todo),
            ("pending", q.pending),
            ("done", q.done),
            ("failed", q.failed),
        ] {
            tasks
                .get_or_create(&QueueLabels { queue: Text(k.into()) })
                .set(v as f64);
        }
        reg.register("tasks", "Tasks in each master queue", tasks);
        gauge(&mut reg, "epoch", "Current pass over the data", q.epoch as f64);
        gauge(
            &mut reg,
            "task_seconds_avg",
            "Moving average of task completion time",
            q.avg_task_ms / 1000.0,
        );
    }
    let t = &s.train;
    counter(&mut reg, "examples", "Training examples processed", t.examples);
    gauge(
        &mut reg,
        "examples_per_second",
        "Training throughput",
        t.examples_per_sec,
    );
    gauge(&mut reg, "model_version", "Model updates applied", t.version as f64);
    if let Some(l) = t.loss {
        gauge(&mut reg, "train_loss", "Most recent mean training loss", l);
    }
    if let Some(a) = t.accuracy {
        gauge(&mut reg, "accuracy", "Last evaluated accuracy", a);
    }
    let tr = &s.traffic;
    counter(&mut reg, "sent_bytes", "Bytes sent by the scheduler", tr.sent_bytes);
    counter(&mut reg, "recv_bytes", "Bytes received by the scheduler", tr.recv_bytes);
    counter(
        &mut reg,
        "malformed_messages",
        "Malformed messages dropped",
        tr.malformed,
    );
    counter(&mut reg, "resent_messages", "Messages resent", tr.resent);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

/// The OpenMetrics text `om` ([`to_prometheus`]) in Prometheus's text format 0.0.4: a
/// counter's help and type name the samples it has (`NAME_total`, where OpenMetrics
/// names the family `NAME`), and no `# EOF` or `# UNIT` lines.
pub fn to_text_format(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            counters.contains(name).then(|| format!("{p}{name}_total {text}"))
        });
        out.push_str(meta.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::snapshot::{NodeStat, QueueStat};
    use super::*;
    use std::collections::BTreeMap;

    /// One sample of the text format, read back: name, labels (unescaped), value.
    type Sample = (String, BTreeMap<String, String>, f64);

    /// A reader of the exposition format, independent of the writer: every line is a
    /// comment (`# HELP`, `# TYPE`, `# EOF`) or `name{k="v",...} value` with escaped
    /// label values.
    fn parse(text: &str) -> Vec<Sample> {
        let mut out = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                assert!(
                    line.starts_with("# HELP ") || line.starts_with("# TYPE ") || line == "# EOF",
                    "{line}"
                );
                continue;
            }
            let name_end = line.find(['{', ' ']).expect("a name");
            let name = line[..name_end].to_string();
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name}");
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(body) = rest.strip_prefix('{') {
                let mut chars = body.char_indices();
                let mut key = String::new();
                loop {
                    let (i, c) = chars.next().expect("unterminated labels");
                    match c {
                        '}' => {
                            rest = &body[i + 1..];
                            break;
                        }
                        ',' => {}
                        '=' => {
                            assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line}");
                            let mut value = String::new();
                            loop {
                                match chars.next().expect("unterminated value").1 {
                                    '"' => break,
                                    '\\' => match chars.next().expect("escape").1 {
                                        'n' => value.push('\n'),
                                        c @ ('\\' | '"') => value.push(c),
                                        c => panic!("bad escape \\{c} in {line}"),
                                    },
                                    '\n' => panic!("raw newline"),
                                    c => value.push(c),
                                }
                            }
                            labels.insert(std::mem::take(&mut key), value);
                        }
                        c => key.push(c),
                    }
                }
            }
            let value: f64 = rest.trim().parse().unwrap_or_else(|_| panic!("value of {line}"));
            out.push((name, labels, value));
        }
        out
    }

    fn find<'a>(samples: &'a [Sample], name: &str) -> Vec<&'a Sample> {
        samples.iter().filter(|s| s.0 == name).collect()
    }

    #[test]
    fn the_exposition_parses_back_with_escaped_labels() {
        let odd = "h\"x\\y\nz:7";
        let s = Snapshot {
            uptime_s: 2.5,
            nodes: vec![NodeStat {
                id: 9,
                role: "worker".into(),
                heartbeat_age_ms: Some(1500),
                ..Default::default()
            }],
            queues: Some(QueueStat {
                todo: 3,
                failed: 1,
                ..Default::default()
            }),
            scheduler: super::super::snapshot::SchedulerStat {
                candidate: 1,
                addr: odd.into(),
                term: 3,
                active: true,
                candidates: 2,
            },
            ..Default::default()
        };
        let text = to_prometheus(&s);
        assert!(text.ends_with("# EOF\n"), "{text}");
        let samples = parse(&text);
        let term = find(&samples, "psrs_scheduler_term");
        assert_eq!(term.len(), 1);
        assert_eq!(term[0].1["addr"], odd, "the address comes back as it was");
        assert_eq!((term[0].1["candidate"].as_str(), term[0].2), ("1", 3.0));
        assert_eq!(find(&samples, "psrs_scheduler_active")[0].2, 1.0);
        assert_eq!(find(&samples, "psrs_uptime_seconds")[0].2, 2.5);
        let up = find(&samples, "psrs_node_up");
        assert_eq!(
            (up[0].1["id"].as_str(), up[0].1["role"].as_str(), up[0].2),
            ("9", "worker", 1.0)
        );
        assert_eq!(find(&samples, "psrs_heartbeat_age_seconds")[0].2, 1.5);
        let tasks: BTreeMap<&str, f64> = find(&samples, "psrs_tasks")
            .iter()
            .map(|s| (s.1["queue"].as_str(), s.2))
            .collect();
        assert_eq!((tasks["todo"], tasks["failed"], tasks["pending"]), (3.0, 1.0, 0.0));
        assert_eq!(find(&samples, "psrs_examples_total").len(), 1);
        assert!(text.contains("# TYPE psrs_examples counter\n"));
        assert!(
            find(&samples, "psrs_train_loss").is_empty(),
            "absent values are not invented"
        );
    }

    /// What `promtool check metrics` asks of the text format, checked here without
    /// it: every sample's name (or its histogram/summary family's) has one `# HELP`
    /// with text and one `# TYPE` line, before its samples; a counter's name ends in
    /// `_total`.
    #[test]
    fn the_text_format_gives_every_sample_its_help_and_type() {
        let s = Snapshot {
            nodes: vec![NodeStat {
                id: 9,
                role: "worker".into(),
                heartbeat_age_ms: Some(1),
                ..Default::default()
            }],
            queues: Some(QueueStat::default()),
            train: super::super::snapshot::TrainStat {
                loss: Some(0.5),
                accuracy: Some(0.9),
                ..Default::default()
            },
            ..Default::default()
        };
        let text = to_text_format(&to_prometheus(&s));
        let mut help = std::collections::HashMap::new();
        let mut kind = std::collections::HashMap::new();
        let mut samples = 0;
        for line in text.lines() {
            if let Some(r) = line.strip_prefix("# HELP ") {
                let (name, h) = r.split_once(' ').unwrap();
                assert!(!h.trim().is_empty() && !h.ends_with(".."), "{line}");
                assert!(help.insert(name.to_string(), h.to_string()).is_none(), "twice: {line}");
            } else if let Some(r) = line.strip_prefix("# TYPE ") {
                let (name, k) = r.split_once(' ').unwrap();
                assert!(kind.insert(name.to_string(), k.to_string()).is_none(), "twice: {line}");
            } else {
                assert!(!line.starts_with('#'), "{line}");
                let name = &line[..line.find(['{', ' ']).unwrap()];
                assert!(help.contains_key(name), "no help text for {name}\n{text}");
                let k = kind.get(name).unwrap_or_else(|| panic!("no type for {name}"));
                assert_eq!(k == "counter", name.ends_with("_total"), "{line}");
                samples += 1;
            }
        }
        assert!(samples >= 15, "{text}");
        assert!(
            text.contains("# TYPE psrs_sent_bytes_total counter\npsrs_sent_bytes_total "),
            "{text}"
        );
    }
}
