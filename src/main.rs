//! `psrs`: one binary for every role of a psrs cluster. The role and the cluster's
//! shape come from the `DMLC_*` / `PS_*` environment variables (see docs/configuration.md).

mod commands;
mod logging;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// psrs: a parameter server for distributed ML training.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start, wait for every node, finalize (ps-lite's test_connection).
    Connect(commands::connection::Args),
    /// Run rounds of barriers over a group, printing enter/leave times.
    Barrier(commands::barrier::Args),
    /// SimpleApp requests from every worker to every node, with checked replies.
    SimpleApp(commands::simple::Args),
    /// ps-lite's test_kv_app: pushes summed on the servers, pulled back and checked.
    KvTest(commands::kv::Args),
    /// KV benchmarks: latency, push/pull throughput, many small keys.
    Bench(commands::bench::Args),
    /// The HTTP API of a running cluster under load and under attack.
    BenchApi(commands::bench_api::Args),
    /// Train a model on a RecordIO dataset (run on every node).
    Train(commands::train::Args),
    /// A long-running cluster that runs submitted jobs (run on every node).
    Cluster(commands::cluster::Args),
    /// Submit, list, watch and cancel a cluster's jobs.
    Job(commands::job::Args),
    /// Make the cluster's CA and certificates (mutual TLS between nodes).
    Certs(commands::certs::Args),
    /// Convert libsvm / CSV / IDX files to RecordIO.
    Convert(commands::convert::Args),
    /// Evaluate a saved model on a RecordIO dataset.
    Eval(commands::eval::Args),
    /// Run the deterministic simulator of the whole protocol over many seeds.
    Simulate(commands::simulate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<(), commands::error::CliError> = match cli.cmd {
        Cmd::Connect(a) => commands::connection::run(a),
        Cmd::Barrier(a) => commands::barrier::run(a),
        Cmd::SimpleApp(a) => commands::simple::run(a),
        Cmd::KvTest(a) => commands::kv::run(a),
        Cmd::Bench(a) => commands::bench::run(a),
        Cmd::BenchApi(a) => commands::bench_api::run(a),
        Cmd::Train(a) => commands::train::run(a),
        Cmd::Cluster(a) => commands::cluster::run(a),
        Cmd::Job(a) => commands::job::run(a),
        Cmd::Certs(a) => commands::certs::run(a),
        Cmd::Convert(a) => commands::convert::run(a),
        Cmd::Eval(a) => commands::eval::run(a),
        Cmd::Simulate(a) => return commands::simulate::main(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            logging::print_error(&e);
            ExitCode::from(e.exit_code())
        }
    }
}
