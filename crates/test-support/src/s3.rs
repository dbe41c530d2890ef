//! A real S3-compatible server for the object-storage tests: `moto`'s
//! server (PyPI `moto[server]`, which `scripts/test` installs in the test
//! venv) as a process on a free loopback port, killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Python that can run `moto.server`: `PIPELINES_PYTHON` when it has
/// the module; `None` otherwise.
pub fn moto_python() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var("PIPELINES_PYTHON").ok()?);
    let ok = Command::new(&python)
        .args(["-c", "import moto.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(python)
}

/// An S3 server process (moto) on `127.0.0.1:<port>`.
pub struct S3Server {
    child: Child,
    port: u16,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
}

impl S3Server {
    /// Starts the server and waits until it answers.
    pub fn start(python: &Path) -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(python);
        cmd.args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: prctl in the child before exec; it touches no memory.
        // The server dies with the thread that started it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start moto.server");
        let server = S3Server {
            child,
            port,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.request("GET", "/").is_err() {
            assert!(Instant::now() < deadline, "moto.server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// One server for the whole test process, started by a thread that
    /// lives until the process ends (the server is killed with it); `None`
    /// when no Python with moto is found (see [`moto_python`]).
    pub fn shared() -> Option<&'static S3Server> {
        static SERVER: OnceLock<Option<S3Server>> = OnceLock::new();
        SERVER
            .get_or_init(|| {
                let python = moto_python()?;
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(S3Server::start(&python));
                    loop {
                        std::thread::park();
                    }
                });
                rx.recv().ok()
            })
            .as_ref()
    }

    /// Creates bucket `name`.
    pub fn create_bucket(&self, name: &str) {
        let status = self
            .request("PUT", &format!("/{name}"))
            .expect("create bucket");
        assert_eq!(status, 200, "creating bucket {name}");
    }

    /// The environment a process needs to use this server: the endpoint,
    /// plain http, a region and the (dummy) credentials moto accepts.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ]
    }

    /// One unsigned HTTP/1.1 request; the response's status code.
    fn request(&self, method: &str, path: &str) -> std::io::Result<u16> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no HTTP status in {response:?}")))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
