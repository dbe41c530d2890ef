//! Generates the Spark Connect client from the protos in `proto/` (Spark
//! 4.3's, unchanged) with protox, a protobuf compiler in Rust: no `protoc`
//! is needed on the machine.

fn main() {
    let root = std::path::Path::new("proto");
    let service = root.join("spark/connect/base.proto");
    println!("cargo:rerun-if-changed=proto");
    let descriptors = match protox::compile([&service], [root]) {
        Ok(d) => d,
        Err(e) => panic!("compiling {}: {e}", service.display()),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(descriptors)
    {
        panic!("generating the Spark Connect client: {e}");
    }
}
