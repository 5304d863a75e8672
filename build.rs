//! Build steps: the `.opg` grammar (lalrpop) and TensorFlow's GraphDef,
//! SavedModel and checkpoint schemas (`proto/tf_graph.proto`,
//! `proto/saved_model.proto`) and the XLA messages of the XLA-only ops'
//! attributes (`proto/xla_data.proto`), compiled by protox without `protoc`, then
//! turned into Rust by prost-build. The encoded descriptor set is written
//! beside the Rust code for prost-reflect's text format.

use std::path::PathBuf;

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=grammar/opg.lalrpop");
    lalrpop::Configuration::new()
        .set_in_dir("grammar")
        .set_out_dir(&out_dir)
        .process()
        .expect("the grammar in grammar/opg.lalrpop must build");

    println!("cargo:rerun-if-changed=proto/tf_graph.proto");
    println!("cargo:rerun-if-changed=proto/saved_model.proto");
    println!("cargo:rerun-if-changed=proto/xla_data.proto");
    let mut compiler = protox::Compiler::new(["proto"]).expect("the proto include path is valid");
    compiler.include_imports(true).include_source_info(false);
    for file in ["tf_graph.proto", "saved_model.proto", "xla_data.proto"] {
        if let Err(e) = compiler.open_file(file) {
            panic!("proto/{file} must compile: {e}");
        }
    }
    std::fs::write(out_dir.join("tf_graph.bin"), compiler.encode_file_descriptor_set()).expect("OUT_DIR is writable");
    prost_build::Config::new()
        .btree_map(["."])
        .boxed(".tensorflow.AttrValue.value.list")
        .boxed(".tensorflow.AttrValue.value.tensor")
        .compile_fds(compiler.file_descriptor_set())
        .expect("prost-build generates the GraphDef types");
}
