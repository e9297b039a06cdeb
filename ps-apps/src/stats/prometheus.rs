//! Prometheus text exposition of a [`Snapshot`].

use super::Snapshot;
use std::fmt::Write;

fn metric(out: &mut String, name: &str, help: &str, kind: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP psrs_{name} {help}");
    let _ = writeln!(out, "# TYPE psrs_{name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "psrs_{name}{labels} {v}");
    }
}

/// Renders `s` in the Prometheus text format (version 0.0.4).
pub fn to_prometheus(s: &Snapshot) -> String {
    let mut o = String::new();
    metric(
        &mut o,
        "uptime_seconds",
        "Seconds since the scheduler started.",
        "gauge",
        &[(String::new(), s.uptime_s)],
    );
    let sc = &s.scheduler;
    metric(
        &mut o,
        "scheduler_term",
        "Term of the scheduler serving these metrics (bumped by every takeover); labels: its candidate index and address.",
        "gauge",
        &[(
            format!("{{candidate=\"{}\",addr=\"{}\"}}", sc.candidate, sc.addr),
            sc.term as f64,
        )],
    );
    metric(
        &mut o,
        "scheduler_active",
        "1 if the scheduler serving these metrics is the active one.",
        "gauge",
        &[(String::new(), if sc.active { 1.0 } else { 0.0 })],
    );
    let nodes: Vec<(String, f64)> = s
        .nodes
        .iter()
        .map(|n| {
            (
                format!("{{id=\"{}\",role=\"{}\"}}", n.id, n.role),
                if n.dead { 0.0 } else { 1.0 },
            )
        })
        .collect();
    metric(
        &mut o,
        "node_up",
        "1 if the node is alive, 0 if declared dead.",
        "gauge",
        &nodes,
    );
    let hb: Vec<(String, f64)> = s
        .nodes
        .iter()
        .filter_map(|n| {
            Some((
                format!("{{id=\"{}\",role=\"{}\"}}", n.id, n.role),
                n.heartbeat_age_ms? as f64 / 1000.0,
            ))
        })
        .collect();
    metric(
        &mut o,
        "heartbeat_age_seconds",
        "Seconds since the node's last heartbeat.",
        "gauge",
        &hb,
    );
    if let Some(q) = &s.queues {
        let tasks = [
            ("todo", q.todo),
            ("pending", q.pending),
            ("done", q.done),
            ("failed", q.failed),
        ]
        .iter()
        .map(|(k, v)| (format!("{{queue=\"{k}\"}}"), *v as f64))
        .collect::<Vec<_>>();
        metric(&mut o, "tasks", "Tasks in each master queue.", "gauge", &tasks);
        metric(
            &mut o,
            "epoch",
            "Current pass over the data.",
            "gauge",
            &[(String::new(), q.epoch as f64)],
        );
        metric(
            &mut o,
            "task_seconds_avg",
            "Moving average of task completion time.",
            "gauge",
            &[(String::new(), q.avg_task_ms / 1000.0)],
        );
    }
    let t = &s.train;
    metric(
        &mut o,
        "examples_total",
        "Training examples processed.",
        "counter",
        &[(String::new(), t.examples as f64)],
    );
    metric(
        &mut o,
        "examples_per_second",
        "Training throughput.",
        "gauge",
        &[(String::new(), t.examples_per_sec)],
    );
    metric(
        &mut o,
        "model_version",
        "Model updates applied.",
        "gauge",
        &[(String::new(), t.version as f64)],
    );
    if let Some(l) = t.loss {
        metric(
            &mut o,
            "train_loss",
            "Most recent mean training loss.",
            "gauge",
            &[(String::new(), l)],
        );
    }
    if let Some(a) = t.accuracy {
        metric(
            &mut o,
            "accuracy",
            "Last evaluated accuracy.",
            "gauge",
            &[(String::new(), a)],
        );
    }
    let tr = &s.traffic;
    for (name, help, v) in [
        ("sent_bytes_total", "Bytes sent by the scheduler.", tr.sent_bytes),
        ("recv_bytes_total", "Bytes received by the scheduler.", tr.recv_bytes),
        ("malformed_messages_total", "Malformed messages dropped.", tr.malformed),
        ("resent_messages_total", "Messages resent.", tr.resent),
    ] {
        metric(&mut o, name, help, "counter", &[(String::new(), v as f64)]);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{NodeStat, QueueStat};

    #[test]
    fn renders_samples_with_labels() {
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
            scheduler: crate::stats::SchedulerStat {
                candidate: 1,
                addr: "h:7".into(),
                term: 3,
                active: true,
                candidates: 2,
            },
            ..Default::default()
        };
        let text = to_prometheus(&s);
        assert!(text.contains("psrs_scheduler_term{candidate=\"1\",addr=\"h:7\"} 3\n"));
        assert!(text.contains("psrs_scheduler_active 1\n"));
        assert!(text.contains("psrs_uptime_seconds 2.5\n"));
        assert!(text.contains("psrs_node_up{id=\"9\",role=\"worker\"} 1\n"));
        assert!(text.contains("psrs_heartbeat_age_seconds{id=\"9\",role=\"worker\"} 1.5\n"));
        assert!(text.contains("psrs_tasks{queue=\"todo\"} 3\n"));
        assert!(text.contains("psrs_tasks{queue=\"failed\"} 1\n"));
        assert!(text.contains("# TYPE psrs_examples_total counter\n"));
        assert!(!text.contains("psrs_train_loss"), "absent values are not invented");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let v = line.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "{line}");
        }
    }
}
