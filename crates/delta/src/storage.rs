//! Delta tables in object storage: delta-rs finds the store of a table URL
//! in its registry of factories; this registers `s3://` (and Hadoop's
//! `s3a://`) with the engine's own S3 stores
//! ([`pipelines_core::engine::storage::object`]: credentials and endpoint
//! from the environment), and delta-rs' default log store, whose every
//! commit is a conditional put (`If-None-Match: *`): of two writers of one
//! version, one wins and the other retries on the new version. No AWS SDK
//! and no lock table are needed.

use std::sync::{Arc, Once};

use deltalake::logstore::{
    default_logstore, logstore_factories, object_store_factories, LogStore, LogStoreFactory,
    ObjectStoreFactory, ObjectStoreRef, StorageConfig,
};
use deltalake::{DeltaResult, DeltaTableError, Path};
use url::Url;

/// The schemes registered.
const SCHEMES: &[&str] = &["s3", "s3a"];

/// Registers the object-storage schemes with delta-rs (once per process).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for scheme in SCHEMES {
            let url = Url::parse(&format!("{scheme}://")).expect("a scheme URL");
            object_store_factories().insert(url.clone(), Arc::new(Stores));
            logstore_factories().insert(url, Arc::new(LogStores));
        }
    });
}

/// The engine's S3 store of the URL's bucket.
struct Stores;

impl ObjectStoreFactory for Stores {
    fn parse_url_opts(
        &self,
        url: &Url,
        _config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let bucket = url
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| DeltaTableError::InvalidTableLocation(url.to_string()))?;
        let store = pipelines_core::engine::storage::object::store_for(&format!("s3://{bucket}"))
            .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
        let path = Path::from_url_path(url.path())
            .map_err(|e| DeltaTableError::Generic(format!("{url}: {e}")))?;
        Ok((store, path))
    }
}

/// delta-rs' default log store (conditional-put commits).
struct LogStores;

impl LogStoreFactory for LogStores {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}
