//! Generates the protocol types from `proto/PulsarApi.proto` with prost.
//!
//! `protox` parses the file in Rust, so building this crate never needs a
//! system `protoc`.

use prost_types::field_descriptor_proto::Type;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/PulsarApi.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed=build.rs");

    let descriptors = protox::compile([PROTO], ["proto"])?;

    let mut config = prost_build::Config::new();
    // Byte fields stay `bytes::Bytes`, sliced from the frame without a copy.
    config.bytes(["."]);
    // BaseCommand holds ~45 optional sub-commands; inline they make it
    // several KiB, moved and zeroed on every frame. Boxed, it is a few hundred
    // bytes plus one allocation for the one command present.
    let base = descriptors
        .file
        .iter()
        .flat_map(|f| &f.message_type)
        .find(|m| m.name() == "BaseCommand")
        .ok_or("BaseCommand missing from the proto")?;
    for field in base.field.iter().filter(|f| f.r#type() == Type::Message) {
        config.boxed(format!(".pulsar.proto.BaseCommand.{}", field.name()));
    }
    config.compile_fds(descriptors)?;
    Ok(())
}
