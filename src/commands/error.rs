//! How a command failed, by kind: the exit status follows the kind, never the
//! message's wording. The message is printed as one line either way.

use ps_apps::bench::BenchError;
use ps_apps::jobs::JobsError;
use ps_apps::master::{MasterError, StoreError};
use ps_apps::model::{ModelError, ModelFileError};
use ps_apps::pyrunner::RunnerError;
use ps_apps::recordio::{ConvertError, RecordIoError, RecordIoKind};
use ps_apps::stats::StatsError;
use ps_apps::train::TrainError;
use ps_core::config::ConfigError;
use ps_core::failover::FailoverError;
use ps_core::kv::KvError;
use ps_core::van::VanError;
use ps_core::PostofficeError;

/// Exit status of a command refused for its input: options, variables, files that are
/// not what they should be.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status of a command whose input was fine but whose work failed (a file that
/// could not be read or written).
pub const EXIT_FAILED: u8 = 1;

/// A command's error.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The input is wrong ([`EXIT_BAD_INPUT`]).
    #[error("{0}")]
    BadInput(String),
    /// The work failed ([`EXIT_FAILED`]).
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// The process's exit status for this kind of error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::BadInput(_) => EXIT_BAD_INPUT,
            CliError::Failed(_) => EXIT_FAILED,
        }
    }
}

/// A command's one-line refusal: bad input, as every command's text error has been.
impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::BadInput(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> CliError {
        CliError::BadInput(message.to_string())
    }
}

/// A conversion's input that is not its format is bad input; a file that cannot be
/// opened, read or written is a failure.
impl From<ConvertError> for CliError {
    fn from(e: ConvertError) -> CliError {
        match e {
            ConvertError::BadInput(_) => CliError::BadInput(e.to_string()),
            ConvertError::Io(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// A file that is not a usable model file is bad input; one that cannot be read or
/// written is a failure.
impl From<ModelFileError> for CliError {
    fn from(e: ModelFileError) -> CliError {
        match e {
            ModelFileError::Io { .. } => CliError::Failed(e.to_string()),
            ModelFileError::NotAModelFile { .. }
            | ModelFileError::UnsupportedVersion { .. }
            | ModelFileError::Truncated { .. }
            | ModelFileError::Corrupt { .. }
            | ModelFileError::Malformed { .. } => CliError::BadInput(e.to_string()),
        }
    }
}

/// A dataset that is not RecordIO, or a location psrs cannot read, is bad input; a
/// file that cannot be opened or read, or an object that does not exist, is a failure
/// (as for a conversion).
impl From<RecordIoError> for CliError {
    fn from(e: RecordIoError) -> CliError {
        match e.kind {
            RecordIoKind::Corrupt | RecordIoKind::Location => CliError::BadInput(e.to_string()),
            RecordIoKind::Open | RecordIoKind::NotFound | RecordIoKind::Io => CliError::Failed(e.to_string()),
        }
    }
}

/// Options that build no valid model, or data that does not fit it, are bad input; a
/// dataset that cannot be read fails by its own kind.
impl From<ModelError> for CliError {
    fn from(e: ModelError) -> CliError {
        match e {
            ModelError::Data(r) => r.into(),
            ModelError::Invalid(_) | ModelError::Misfit(_) | ModelError::Empty(_) | ModelError::Example(_) => {
                CliError::BadInput(e.to_string())
            }
        }
    }
}

/// A store that cannot load or save fails the command.
impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        CliError::Failed(e.to_string())
    }
}

/// The master's settings are bad input, a dataset fails by its kind, corrupt state or
/// a store that fails is a failure.
impl From<MasterError> for CliError {
    fn from(e: MasterError) -> CliError {
        match e {
            MasterError::Config(_) => CliError::BadInput(e.to_string()),
            MasterError::Dataset(r) => r.into(),
            MasterError::Corrupt(_) | MasterError::Store(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// Security settings or an address that may not be served are bad input; a server
/// that cannot bind or start is a failure.
impl From<StatsError> for CliError {
    fn from(e: StatsError) -> CliError {
        match e {
            StatsError::Config(c) => c.into(),
            StatsError::Unauthorized(_)
            | StatsError::Forbidden(_)
            | StatsError::BadRequest(_)
            | StatsError::NotJson(_)
            | StatsError::TooLarge(_)
            | StatsError::Exposed(_)
            | StatsError::Tls(_) => CliError::BadInput(e.to_string()),
            StatsError::Io(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// The runner's options, or an interpreter that does not start, are bad input; a
/// runner that dies, hangs or breaks the protocol, or user code that raises, is a
/// failure.
impl From<RunnerError> for CliError {
    fn from(e: RunnerError) -> CliError {
        match e {
            RunnerError::Invalid(_) | RunnerError::Spawn { .. } => CliError::BadInput(e.to_string()),
            RunnerError::Died(_) | RunnerError::Timeout(_) | RunnerError::Raised(_) | RunnerError::Protocol(_) => {
                CliError::Failed(e.to_string())
            }
        }
    }
}

/// Training's errors by their kinds: data, a model or a master that refuses the
/// dataset is bad input; a scheduler or server that does not answer, a checkpoint or
/// thread that fails, is a failure.
impl From<TrainError> for CliError {
    fn from(e: TrainError) -> CliError {
        match e {
            TrainError::Kv(k) => k.into(),
            TrainError::Register(p) => p.into(),
            TrainError::Model(m) => m.into(),
            TrainError::ModelFile(f) => f.into(),
            TrainError::Data(r) => r.into(),
            TrainError::Stats(s) => s.into(),
            TrainError::Master(_) | TrainError::BadData(_) => CliError::BadInput(e.to_string()),
            TrainError::Unanswered(_)
            | TrainError::Malformed(_)
            | TrainError::CheckpointIo(_)
            | TrainError::CorruptCheckpoint(_)
            | TrainError::Thread(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// The jobs cluster's errors by their kinds: a request, a job or data that is wrong is
/// bad input; state, outputs or a query that fails is a failure.
impl From<JobsError> for CliError {
    fn from(e: JobsError) -> CliError {
        match e {
            JobsError::Train(t) => t.into(),
            JobsError::Runner(r) => r.into(),
            JobsError::Stats(s) => s.into(),
            JobsError::Register(p) => p.into(),
            JobsError::BadRequest(_)
            | JobsError::Forbidden(_)
            | JobsError::NoSuchJob(_)
            | JobsError::UnknownJob(_)
            | JobsError::Ended { .. }
            | JobsError::Final { .. }
            | JobsError::BadData(_) => CliError::BadInput(e.to_string()),
            JobsError::Timeout(_)
            | JobsError::Corrupt(_)
            | JobsError::Io(_)
            | JobsError::Internal(_)
            | JobsError::SteppedDown(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// A benchmark's request that fails, or a pull of the wrong size, is a failure (a
/// request the key-value layer refuses is bad input).
impl From<BenchError> for CliError {
    fn from(e: BenchError) -> CliError {
        match e {
            BenchError::Kv(k) => k.into(),
            BenchError::WrongSize { .. } => CliError::Failed(e.to_string()),
        }
    }
}

/// A configuration that cannot work is bad input.
impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> CliError {
        CliError::BadInput(e.to_string())
    }
}

/// A failover step the configuration or the build rules out (no etcd lock service)
/// is bad input; a scheduler that is not active, a lock lost or a lock service that
/// does not answer is a failure.
impl From<FailoverError> for CliError {
    fn from(e: FailoverError) -> CliError {
        match e {
            FailoverError::NoLockService => CliError::BadInput(e.to_string()),
            FailoverError::NotScheduler(_)
            | FailoverError::NotActive(_)
            | FailoverError::WrongElection(_)
            | FailoverError::LockLost(_)
            | FailoverError::Unavailable(_)
            | FailoverError::NotSaved(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// The van's refusals and timeouts say the cluster's shape, addresses or credentials
/// are wrong (bad input); a port, connection or thread this host cannot have is a
/// failure.
impl From<VanError> for CliError {
    fn from(e: VanError) -> CliError {
        match e {
            VanError::Config(c) => c.into(),
            VanError::Failover(f) => f.into(),
            VanError::Refused(_) | VanError::Timeout(_) | VanError::Unreachable(_) => CliError::BadInput(e.to_string()),
            VanError::Io(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// The postoffice's errors by their kinds: a configuration or a customer id taken
/// twice is bad input, a thread that does not start a failure.
impl From<PostofficeError> for CliError {
    fn from(e: PostofficeError) -> CliError {
        match e {
            PostofficeError::Config(c) => c.into(),
            PostofficeError::Van(v) => v.into(),
            PostofficeError::CustomerTaken { .. } => CliError::BadInput(e.to_string()),
            PostofficeError::Thread(_) => CliError::Failed(e.to_string()),
        }
    }
}

/// A request the key-value layer refuses before sending it (unsorted keys, values
/// that do not fit) is bad input; a server's refusal, a lost or malformed message, a
/// replica that cannot serve is a failure.
impl From<KvError> for CliError {
    fn from(e: KvError) -> CliError {
        match e {
            KvError::Register(p) => p.into(),
            KvError::Unsorted(_) | KvError::BadLength(_) | KvError::Misaligned { .. } => {
                CliError::BadInput(e.to_string())
            }
            KvError::OutOfRange(..)
            | KvError::BadFrame(_)
            | KvError::Server(..)
            | KvError::Transport(_)
            | KvError::BadHeader(_)
            | KvError::BadCopy(_)
            | KvError::CannotServe(_) => CliError::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_follows_the_kind() {
        let io = CliError::from(ConvertError::Io("cannot open a.csv: No such file".into()));
        assert_eq!(
            (io.exit_code(), io.to_string().as_str()),
            (1, "cannot open a.csv: No such file")
        );
        // a bad line whose text happens to mention a file error is still bad input
        let bad = CliError::from(ConvertError::BadInput(
            "a.csv:3: cannot open: 'x' is not a number".into(),
        ));
        assert_eq!(bad.exit_code(), 2);
        assert_eq!(CliError::from("--labels is required".to_string()).exit_code(), 2);
    }

    #[test]
    fn the_cores_errors_exit_by_their_kind() {
        // a join that timed out is the cluster's shape (2), whatever its words say
        let timeout = CliError::from(PostofficeError::Van(VanError::Timeout("cannot bind: failed".into())));
        assert_eq!(
            (timeout.exit_code(), timeout.to_string().as_str()),
            (2, "cannot bind: failed")
        );
        // a port this host cannot have is a failure (1)
        assert_eq!(
            CliError::from(VanError::Io("cannot bind 127.0.0.1:9: Address in use".into())).exit_code(),
            1
        );
        assert_eq!(CliError::from(FailoverError::NoLockService).exit_code(), 2);
        assert_eq!(
            CliError::from(FailoverError::Unavailable("etcd: cannot connect".into())).exit_code(),
            1
        );
        assert_eq!(CliError::from(KvError::Unsorted(1)).exit_code(), 2);
        assert_eq!(CliError::from(KvError::Transport("no reply".into())).exit_code(), 1);
        let taken = CliError::from(KvError::Register(PostofficeError::Thread("no threads".into())));
        assert_eq!((taken.exit_code(), taken.to_string().as_str()), (1, "no threads"));
    }

    #[test]
    fn the_apps_errors_exit_by_their_kind() {
        // a scheduler that stays silent fails the run, whatever its words say
        let silent = CliError::from(TrainError::Unanswered("bad input: the scheduler did not answer".into()));
        assert_eq!(silent.exit_code(), 1);
        assert_eq!(silent.to_string(), "bad input: the scheduler did not answer");
        // data that does not fit the model is bad input
        assert_eq!(
            CliError::from(TrainError::BadData("a.rio: chunk 0: x".into())).exit_code(),
            2
        );
        assert_eq!(
            CliError::from(ModelError::Invalid("softmax(0→2): x".into())).exit_code(),
            2
        );
        // a job cluster's conflict is the request's fault, its lost outputs a failure
        assert_eq!(
            CliError::from(JobsError::Final {
                num: 1,
                state: "done".into()
            })
            .exit_code(),
            2
        );
        assert_eq!(
            CliError::from(JobsError::Io("batch 2: cannot read".into())).exit_code(),
            1
        );
        // the kind inside a wrapper decides
        let stats = CliError::from(JobsError::Stats(StatsError::Io(
            "cannot serve statistics on x: y".into(),
        )));
        assert_eq!(stats.exit_code(), 1);
        assert_eq!(
            CliError::from(RunnerError::Invalid("--runner-threads must be at least 1".into())).exit_code(),
            2
        );
        assert_eq!(CliError::from(BenchError::WrongSize { got: 1, want: 2 }).exit_code(), 1);
        assert_eq!(
            CliError::from(StoreError::Failed("etcd: get: unavailable".into())).exit_code(),
            1
        );
        let missing = ps_apps::recordio::index(std::path::Path::new("/nonexistent/psrs/x.rio")).unwrap_err();
        assert_eq!(CliError::from(ModelError::Data(missing)).exit_code(), 1);
    }
}
