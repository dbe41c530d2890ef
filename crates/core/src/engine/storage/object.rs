//! Files in object storage (`s3://bucket/prefix`) through the `object_store`
//! crate, the one delta-rs uses. There is no rename and no hard link there:
//! a write-once is a conditional put (`If-None-Match: *`), which the store
//! refuses when the key exists, so two writers never both win; a replace is
//! a plain put (atomic per object).
//!
//! Credentials and the endpoint come from the environment, as the AWS tools
//! and delta-rs read them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`
//! for a local endpoint); nothing of them is written to a checkpoint.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::WriteOnce;
use crate::error::{Error, Result};

/// What to check when object storage cannot be reached or refuses a request.
const HELP: &str = "check the endpoint and credentials in the environment (AWS_ENDPOINT_URL, \
     AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; AWS_ALLOW_HTTP=true for an http:// \
     endpoint) and that the bucket exists";

/// A key in object storage: the store (`s3://bucket`) and the key under it
/// (`a/b`, no leading or trailing slash; empty for the bucket's root).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `scheme://bucket`.
    pub store: String,
    /// The key, segments joined by `/`.
    pub key: String,
}

impl ObjectKey {
    /// `s3://bucket/a/b` (or `s3://bucket` for the root).
    pub fn url(&self) -> String {
        if self.key.is_empty() {
            self.store.clone()
        } else {
            format!("{}/{}", self.store, self.key)
        }
    }

    fn path(&self) -> ObjectPath {
        ObjectPath::from_iter(self.key.split('/').filter(|s| !s.is_empty()))
    }
}

/// The stores opened so far, one per bucket.
fn stores() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    STORES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The store of `store` (`s3://bucket`), built from the environment the
/// first time (the Delta connector opens its tables' stores here too).
pub fn store_for(store: &str) -> Result<Arc<dyn ObjectStore>> {
    let mut map = stores().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = map.get(store) {
        return Ok(s.clone());
    }
    let built = AmazonS3Builder::from_env()
        .with_url(store)
        .build()
        .map_err(|e| {
            Error::external_with_help(format!("cannot open object storage {store}"), HELP, e)
        })?;
    let built: Arc<dyn ObjectStore> = Arc::new(built);
    map.insert(store.to_string(), built.clone());
    Ok(built)
}

/// How many requests the engine's checkpoints, state, logs and leases have
/// made to object storage in this process (Delta tables' own are not
/// counted): the benchmark's requests per batch.
pub fn requests() -> u64 {
    REQUESTS.load(std::sync::atomic::Ordering::Relaxed)
}

static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs a future of object storage (or of delta-rs, which uses the same
/// stores) to completion from synchronous code, also when called from
/// inside the engine's own tokio runtime (on a helper thread, so no runtime
/// is started inside another). One runtime of two threads serves both.
pub fn block_on<F: Future + Send>(fut: F) -> F::Output
where
    F::Output: Send,
{
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pipelines-io")
            .enable_all()
            .build()
            .expect("a tokio runtime of two threads for object storage and Delta")
    });
    if tokio::runtime::Handle::try_current().is_err() {
        return rt.block_on(fut);
    }
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(fut))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// [`block_on`] for one request of the engine's own, counted in
/// [`requests`].
fn request<F: Future + Send>(fut: F) -> F::Output
where
    F::Output: Send,
{
    REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    block_on(fut)
}

fn failed(what: &str, key: &ObjectKey, e: object_store::Error) -> Error {
    Error::external_with_help(format!("cannot {what} {}", key.url()), HELP, e)
}

/// A failed put: "not found" there means the bucket is missing.
fn write_failed(key: &ObjectKey, e: object_store::Error) -> Error {
    if matches!(e, object_store::Error::NotFound { .. }) {
        let bucket = key.store.split("://").nth(1).unwrap_or(&key.store);
        return Error::runtime_with_help(
            format!(
                "cannot write {}: the bucket `{bucket}` does not exist",
                key.url()
            ),
            "create the bucket, or point the location at one that exists (and check \
             AWS_ENDPOINT_URL: another endpoint has other buckets)",
        );
    }
    failed("write", key, e)
}

/// The bytes of `key`; `None` when it does not exist.
pub(crate) fn read(key: &ObjectKey) -> Result<Option<Vec<u8>>> {
    let store = store_for(&key.store)?;
    request(fetch(store, key.path()))
        .map(|b| b.map(|b| b.to_vec()))
        .map_err(|e| failed("read", key, e))
}

/// Creates `key` with `bytes` unless it exists (a conditional put).
pub(crate) fn write_once(key: &ObjectKey, bytes: &[u8]) -> Result<WriteOnce> {
    let store = store_for(&key.store)?;
    let path = key.path();
    let payload = PutPayload::from(bytes.to_vec());
    let opts = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    let put = request(async move { store.put_opts(&path, payload, opts).await });
    match put {
        Ok(_) => Ok(WriteOnce::Written),
        Err(object_store::Error::AlreadyExists { .. }) => match read(key)? {
            Some(existing) if existing == bytes => Ok(WriteOnce::Identical),
            _ => Ok(WriteOnce::Differs),
        },
        Err(e @ object_store::Error::NotImplemented { .. }) => Err(Error::external_with_help(
            format!(
                "cannot write {} once: the store has no conditional put",
                key.url()
            ),
            "use a store with conditional writes (S3 and its compatible servers support \
             `If-None-Match: *`), and leave AWS_CONDITIONAL_PUT at its default (`etag`)",
            e,
        )),
        Err(e) => Err(write_failed(key, e)),
    }
}

/// The version of an object a conditional replace expects (its ETag).
#[derive(Clone, Debug)]
pub struct Version(UpdateVersion);

/// The bytes of `key` and their version; `None` when it does not exist.
pub(crate) fn read_versioned(key: &ObjectKey) -> Result<Option<(Vec<u8>, Version)>> {
    let store = store_for(&key.store)?;
    let path = key.path();
    request(async move {
        match store.get(&path).await {
            Ok(got) => {
                let version = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                let bytes = got.bytes().await?;
                Ok(Some((bytes.to_vec(), Version(version))))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    })
    .map_err(|e| failed("read", key, e))
}

/// Writes `bytes` to `key` only if it is still at `expected` (absent when
/// `None`): the new version when this write won, `None` when another
/// writer changed the object first.
pub(crate) fn write_if(
    key: &ObjectKey,
    bytes: &[u8],
    expected: Option<&Version>,
) -> Result<Option<Version>> {
    let store = store_for(&key.store)?;
    let path = key.path();
    let payload = PutPayload::from(bytes.to_vec());
    let opts = PutOptions {
        mode: match expected {
            None => PutMode::Create,
            Some(v) => PutMode::Update(v.0.clone()),
        },
        ..Default::default()
    };
    match request(async move { store.put_opts(&path, payload, opts).await }) {
        Ok(put) => Ok(Some(Version(UpdateVersion {
            e_tag: put.e_tag,
            version: put.version,
        }))),
        Err(object_store::Error::AlreadyExists { .. })
        | Err(object_store::Error::Precondition { .. }) => Ok(None),
        Err(e) => Err(write_failed(key, e)),
    }
}

/// Replaces `key` with `bytes` (a plain put: atomic per object).
pub(crate) fn replace(key: &ObjectKey, bytes: &[u8]) -> Result<()> {
    let store = store_for(&key.store)?;
    let path = key.path();
    let payload = PutPayload::from(bytes.to_vec());
    request(async move { store.put(&path, payload).await })
        .map(|_| ())
        .map_err(|e| write_failed(key, e))
}

/// Whether `key` exists.
pub(crate) fn exists(key: &ObjectKey) -> Result<bool> {
    Ok(head(key)?.is_some())
}

/// The size and modification time of `key` (as [`list_recursive`] gives
/// them, `relative` empty); `None` when it does not exist.
pub(crate) fn head(key: &ObjectKey) -> Result<Option<ListedObject>> {
    let store = store_for(&key.store)?;
    let path = key.path();
    request(async move {
        match store.head(&path).await {
            Ok(meta) => Ok(Some(ListedObject {
                relative: String::new(),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    })
    .map_err(|e| failed("look up", key, e))
}

/// Deletes `key`; `false` when it did not exist.
pub(crate) fn remove(key: &ObjectKey) -> Result<bool> {
    if !exists(key)? {
        return Ok(false);
    }
    let store = store_for(&key.store)?;
    let path = key.path();
    request(async move {
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    })
    .map(|()| true)
    .map_err(|e| failed("delete", key, e))
}

/// The names of the objects directly under `key` (as a directory), sorted.
pub(crate) fn list(key: &ObjectKey) -> Result<Vec<String>> {
    let store = store_for(&key.store)?;
    let path = key.path();
    let listed = request(async move { store.list_with_delimiter(Some(&path)).await })
        .map_err(|e| failed("list", key, e))?;
    let mut names: Vec<String> = listed
        .objects
        .iter()
        .filter_map(|o| o.location.filename().map(str::to_string))
        .collect();
    names.sort_unstable();
    Ok(names)
}

/// True when no object is under `key` (as a directory).
pub(crate) fn is_empty(key: &ObjectKey) -> Result<bool> {
    let store = store_for(&key.store)?;
    let path = key.path();
    request(async move {
        let mut listed = store.list(Some(&path));
        match listed.next().await {
            None => Ok(true),
            Some(Ok(_)) => Ok(false),
            Some(Err(e)) => Err(e),
        }
    })
    .map_err(|e| failed("list", key, e))
}

/// An object found by [`list_recursive`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedObject {
    /// The key below the listed prefix (`a/b.json`).
    pub relative: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (ms since the epoch).
    pub modified_ms: i64,
}

/// Every object under `key` (as a directory), at any depth, sorted by key.
pub(crate) fn list_recursive(key: &ObjectKey) -> Result<Vec<ListedObject>> {
    let store = store_for(&key.store)?;
    let prefix = key.path();
    let listed: Vec<object_store::ObjectMeta> = request(async move {
        let mut stream = store.list(Some(&prefix));
        let mut out = Vec::new();
        while let Some(meta) = stream.next().await {
            out.push(meta?);
        }
        Ok::<_, object_store::Error>(out)
    })
    .map_err(|e| failed("list", key, e))?;
    let skip = key.path().parts().count();
    let mut out: Vec<ListedObject> = listed
        .into_iter()
        .map(|m| ListedObject {
            relative: m
                .location
                .parts()
                .skip(skip)
                .map(|p| p.as_ref().to_string())
                .collect::<Vec<_>>()
                .join("/"),
            size: m.size,
            modified_ms: m.last_modified.timestamp_millis(),
        })
        .filter(|o| !o.relative.is_empty())
        .collect();
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(out)
}

/// How many objects a batch fetches at once.
const FETCH_CONCURRENCY: usize = 8;

/// The bytes of each of `keys` (`None` for one that does not exist),
/// fetched up to eight at a time, in the order given.
pub(crate) fn read_many(keys: &[ObjectKey]) -> Result<Vec<Option<bytes::Bytes>>> {
    let mut requests = Vec::with_capacity(keys.len());
    for key in keys {
        requests.push((store_for(&key.store)?, key.path()));
    }
    REQUESTS.fetch_add(keys.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let fetches: Vec<_> = requests
        .into_iter()
        .map(|(store, path)| fetch(store, path))
        .collect();
    let fetched: Vec<std::result::Result<Option<bytes::Bytes>, object_store::Error>> =
        block_on(async move {
            futures::stream::iter(fetches)
                .buffered(FETCH_CONCURRENCY)
                .collect()
                .await
        });
    fetched
        .into_iter()
        .zip(keys)
        .map(|(r, key)| r.map_err(|e| failed("read", key, e)))
        .collect()
}

/// The bytes of one object; `None` when it does not exist.
async fn fetch(
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
) -> std::result::Result<Option<bytes::Bytes>, object_store::Error> {
    match store.get(&path).await {
        Ok(got) => got.bytes().await.map(Some),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Files up to this size are uploaded in one put; larger ones in parts.
const SINGLE_PUT_BYTES: u64 = 64 * 1024 * 1024;

/// The size of each part of a multipart upload.
const PART_BYTES: usize = 16 * 1024 * 1024;

/// Uploads the local file `from` as `key` (replacing it): one put, or a
/// multipart upload for a file over 64 MiB. Returns its size.
pub(crate) fn upload(key: &ObjectKey, from: &std::path::Path) -> Result<u64> {
    use std::io::Read;
    let size = std::fs::metadata(from)
        .map_err(|e| Error::io(from, e))?
        .len();
    let store = store_for(&key.store)?;
    let path = key.path();
    if size <= SINGLE_PUT_BYTES {
        let bytes = std::fs::read(from).map_err(|e| Error::io(from, e))?;
        let payload = PutPayload::from(bytes);
        request(async move { store.put(&path, payload).await })
            .map_err(|e| write_failed(key, e))?;
        return Ok(size);
    }
    let mut file = std::fs::File::open(from).map_err(|e| Error::io(from, e))?;
    // The parts are sent by tasks of the I/O runtime, so the whole upload
    // runs inside it (the file is read there, a part at a time).
    let uploaded = request(async move {
        let upload = store.put_multipart(&path).await.map_err(Upload::Store)?;
        let mut writer = object_store::WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buf = vec![0u8; PART_BYTES];
        loop {
            let n = file.read(&mut buf).map_err(Upload::Read)?;
            if n == 0 {
                break;
            }
            writer
                .wait_for_capacity(FETCH_CONCURRENCY)
                .await
                .map_err(Upload::Store)?;
            writer.write(&buf[..n]);
        }
        writer.finish().await.map_err(Upload::Store)
    });
    match uploaded {
        Ok(_) => {}
        Err(Upload::Store(e)) => return Err(write_failed(key, e)),
        Err(Upload::Read(e)) => return Err(Error::io(from, e)),
    }
    Ok(size)
}

/// Why a multipart upload failed.
enum Upload {
    Store(object_store::Error),
    Read(std::io::Error),
}

/// The names of the objects directly under `key` (as a directory) that
/// sort after `after`, sorted.
pub(crate) fn list_after(key: &ObjectKey, after: Option<&str>) -> Result<Vec<String>> {
    let Some(after) = after else {
        return list(key);
    };
    let store = store_for(&key.store)?;
    let prefix = key.path();
    let offset = key.path().clone().join(after);
    let listed: Vec<object_store::ObjectMeta> = request(async move {
        let mut stream = store.list_with_offset(Some(&prefix), &offset);
        let mut out = Vec::new();
        while let Some(meta) = stream.next().await {
            out.push(meta?);
        }
        Ok::<_, object_store::Error>(out)
    })
    .map_err(|e| failed("list", key, e))?;
    let depth = key.path().parts().count() + 1;
    let mut names: Vec<String> = listed
        .iter()
        .filter(|m| m.location.parts().count() == depth)
        .filter_map(|m| m.location.filename().map(str::to_string))
        .filter(|n| n.as_str() > after)
        .collect();
    names.sort_unstable();
    Ok(names)
}

/// Deletes every object under `key` (as a directory).
pub(crate) fn remove_all(key: &ObjectKey) -> Result<()> {
    let store = store_for(&key.store)?;
    let path = key.path();
    request(async move {
        let locations = store
            .list(Some(&path))
            .map(|m| m.map(|m| m.location))
            .boxed();
        let mut deleted = store.delete_stream(locations);
        while let Some(r) = deleted.next().await {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
    .map_err(|e| failed("delete", key, e))
}
