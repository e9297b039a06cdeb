//! The shell over `object_store`: one tokio runtime and one client per store (S3
//! bucket or HTTP server) for the process, blocking calls for psrs's threads. Requests
//! that fail transiently are retried by `object_store` (`PS_OBJECT_RETRIES`, backoff);
//! a missing object is [`StorageError::NotFound`].

use super::config::ObjectStoreConfig;
use super::error::StorageError;
use super::location::Location;
use super::range::RangeGet;
use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::LazyLock as Lazy;

static RUNTIME: Lazy<Result<tokio::runtime::Runtime, String>> = Lazy::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("psrs-storage")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the object store runtime: {e}"))
});

static CONFIG: Lazy<Result<ObjectStoreConfig, String>> =
    Lazy::new(|| ObjectStoreConfig::from_env().map_err(|e| e.to_string()));

static STORES: Lazy<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, StorageError> {
    let rt = RUNTIME.as_ref().map_err(|e| StorageError::Config(e.clone()))?;
    Ok(rt.block_on(f))
}

fn store_for(loc: &Location) -> Result<(Arc<dyn ObjectStore>, ObjectPath), StorageError> {
    // reqwest's TLS (rustls) uses the process's default crypto provider: ring's (an
    // error means one is installed already)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cfg = CONFIG.as_ref().map_err(|e| StorageError::Config(e.clone()))?;
    let (id, path) = match loc {
        Location::S3 { bucket, key } => (format!("s3://{bucket}"), key),
        Location::Http { base, path } => (base.clone(), path),
        Location::Local(p) => return Err(StorageError::io(p.display(), "a local path is not an object")),
    };
    let mut stores = STORES.lock();
    if let Some(s) = stores.get(&id) {
        return Ok((Arc::clone(s), ObjectPath::from(path.as_str())));
    }
    let retry = RetryConfig {
        max_retries: cfg.retries,
        ..RetryConfig::default()
    };
    let options = ClientOptions::new()
        .with_timeout(cfg.timeout)
        .with_allow_http(cfg.allow_http || matches!(loc, Location::Http { base, .. } if base.starts_with("http://")));
    let built: object_store::Result<Arc<dyn ObjectStore>> = match loc {
        Location::S3 { bucket, .. } => {
            let mut b = AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region(&cfg.region)
                .with_allow_http(cfg.allow_http)
                .with_retry(retry)
                .with_client_options(options);
            if let Some(e) = &cfg.endpoint {
                b = b.with_endpoint(e);
            }
            match &cfg.credentials {
                Some((id, secret)) => {
                    b = b.with_access_key_id(id).with_secret_access_key(secret);
                    if let Some(t) = &cfg.session_token {
                        b = b.with_token(t);
                    }
                }
                // no credentials: unsigned requests (public buckets), never the
                // instance-metadata service
                None => b = b.with_skip_signature(true),
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        Location::Http { base, .. } => HttpBuilder::new()
            .with_url(base)
            .with_retry(retry)
            .with_client_options(options)
            .build()
            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>),
        Location::Local(_) => unreachable!(),
    };
    let store = built.map_err(|e| StorageError::io(loc, e))?;
    stores.insert(id, Arc::clone(&store));
    Ok((store, ObjectPath::from(path.as_str())))
}

fn map_err(loc: &Location, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound {
            location: loc.to_string(),
        },
        e => StorageError::io(loc, e),
    }
}

/// One remote object opened for range reads (its size read once, by a HEAD request).
pub struct RemoteObject {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    loc: Location,
    size: u64,
}

impl RemoteObject {
    /// Opens `loc` (an S3 or HTTP location): a missing object is
    /// [`StorageError::NotFound`].
    pub fn open(loc: &Location) -> Result<RemoteObject, StorageError> {
        let (store, path) = store_for(loc)?;
        let meta = block_on(store.head(&path))?.map_err(|e| map_err(loc, e))?;
        Ok(RemoteObject {
            store,
            path,
            loc: loc.clone(),
            size: meta.size,
        })
    }

    /// `loc` for range reads of known extent, without the HEAD request: its size is
    /// unknown ([`RangeGet::size`] is `u64::MAX`) and a range past its end is an error.
    pub fn without_size(loc: &Location) -> Result<RemoteObject, StorageError> {
        let (store, path) = store_for(loc)?;
        Ok(RemoteObject {
            store,
            path,
            loc: loc.clone(),
            size: u64::MAX,
        })
    }

    /// The whole object.
    pub fn get_all(&self) -> Result<Bytes, StorageError> {
        self.get(0..self.size)
    }
}

impl RangeGet for RemoteObject {
    fn size(&self) -> u64 {
        self.size
    }

    fn get(&self, range: Range<u64>) -> Result<Bytes, StorageError> {
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let want = range.end - range.start;
        let got = block_on(self.store.get_range(&self.path, range))?.map_err(|e| map_err(&self.loc, e))?;
        if got.len() as u64 != want {
            return Err(StorageError::io(
                &self.loc,
                format!("asked for {want} bytes, the store sent {}", got.len()),
            ));
        }
        Ok(got)
    }
}

impl RangeGet for &RemoteObject {
    fn size(&self) -> u64 {
        (*self).size()
    }
    fn get(&self, range: Range<u64>) -> Result<Bytes, StorageError> {
        (*self).get(range)
    }
}

/// Writes `bytes` as the object at `loc` (one PUT; an object appears whole or not at all).
pub fn put(loc: &Location, bytes: &[u8]) -> Result<(), StorageError> {
    let (store, path) = store_for(loc)?;
    let payload = PutPayload::from(Bytes::copy_from_slice(bytes));
    block_on(store.put(&path, payload))?.map_err(|e| map_err(loc, e))?;
    Ok(())
}
