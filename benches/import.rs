//! Import speed on a ~100k-node transformer-like GraphDef, as `.pb` and `.pbtxt`.
//!
//! `cargo bench --bench import`. The graph comes from
//! `import::synth::transformer_graphdef` with 8 replicas.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;
use tpu_rewrite::tf::export::to_pb;
use tpu_rewrite::tf::pbtxt_print::print_graphdef;
use tpu_rewrite::tf::synth::{layers_for_nodes, transformer_graphdef, TransformerConfig};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

mod common;
use common::Timer;

const NODES: usize = 100_000;

fn bench_import(c: &mut Criterion) {
    let config = TransformerConfig::default();
    let graph_def = transformer_graphdef(layers_for_nodes(NODES, &config), &config);
    let pb = graph_def.encode_to_vec();
    let pbtxt = print_graphdef(&graph_def);
    eprintln!(
        "graph: {} nodes; .pb {:.1} MB, .pbtxt {:.1} MB",
        graph_def.node.len(),
        pb.len() as f64 / 1e6,
        pbtxt.len() as f64 / 1e6
    );

    report_phases(&config);
    compare_prost_reflect(&config);

    let mut group = c.benchmark_group("import_100k");
    group.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(graph_def.node.len() as u64));
    group.bench_function("pb", |b| b.iter(|| import_graphdef(black_box(&pb), GraphDefFormat::Binary)));
    group.bench_function("pbtxt", |b| b.iter(|| import_graphdef(black_box(pbtxt.as_bytes()), GraphDefFormat::Text)));
    let (module, _) = import_graphdef(&pb, GraphDefFormat::Binary).expect("the synthetic graph imports");
    let graph = &module.graphs[0];
    group.bench_function("export_pb", |b| b.iter(|| to_pb(black_box(graph)).expect("exports")));
    group.finish();
}

/// Prints one-shot timings of each import phase at growing sizes, to show
/// the cost is linear in the node count.
fn report_phases(config: &TransformerConfig) {
    use tpu_rewrite::tf::{decode_pb, pbtxt, to_ir};
    for nodes in [10_000, 50_000, NODES] {
        let graph_def = transformer_graphdef(layers_for_nodes(nodes, config), config);
        let pb = graph_def.encode_to_vec();
        let text = print_graphdef(&graph_def);
        let t = Timer::start();
        let decoded = decode_pb(&pb).expect("decodes");
        let decode = t.stop();
        let t = Timer::start();
        let parsed = pbtxt::parse_graphdef_text(text.as_bytes()).expect("parses");
        let parse = t.stop();
        let t = Timer::start();
        let (module, _) = to_ir::graphdef_to_module(decoded, None);
        let convert = t.stop();
        let t = Timer::start();
        let exported = to_pb(&module.graphs[0]).expect("exports");
        let export = t.stop();
        eprintln!(
            "{} nodes (wall / cpu): pb decode {decode}, pbtxt parse {parse}, GraphDef->IR {convert}, IR->pb {export}",
            graph_def.node.len()
        );
        black_box((parsed, exported));
    }
}

/// Our text format parser and printer against prost-reflect's on the
/// 88k-node transformer, best of three each (the figures quoted in
/// `src/tf/pbtxt.rs`).
fn compare_prost_reflect(config: &TransformerConfig) {
    use prost_reflect::DynamicMessage;
    use tpu_rewrite::tf::{pbtxt, proto::descriptor_pool, GraphDef};
    let graph_def = transformer_graphdef(layers_for_nodes(88_000, config), config);
    let text = print_graphdef(&graph_def);
    let desc = descriptor_pool().get_message_by_name("tensorflow.GraphDef").expect("the schema has GraphDef");
    let best = |f: &mut dyn FnMut()| {
        (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    let ours_parse = best(&mut || {
        black_box(pbtxt::parse_graphdef_text(text.as_bytes()).expect("parses"));
    });
    let theirs_parse = best(&mut || {
        let m = DynamicMessage::parse_text_format(desc.clone(), &text).expect("prost-reflect parses");
        black_box(m.transcode_to::<GraphDef>().expect("transcodes"));
    });
    let ours_print = best(&mut || {
        black_box(print_graphdef(&graph_def));
    });
    let theirs_print = best(&mut || {
        let mut m = DynamicMessage::new(desc.clone());
        m.transcode_from(&graph_def).expect("transcodes");
        black_box(m.to_text_format_with_options(&prost_reflect::text_format::FormatOptions::new().pretty(true)));
    });
    eprintln!(
        "{} nodes, {:.1} MB text: parse ours {ours_parse:.0} ms, prost-reflect {theirs_parse:.0} ms ({:.1}x); \
         print ours {ours_print:.0} ms, prost-reflect {theirs_print:.0} ms ({:.1}x)",
        graph_def.node.len(),
        text.len() as f64 / 1e6,
        theirs_parse / ours_parse,
        theirs_print / ours_print
    );
}

criterion_group!(benches, bench_import);
criterion_main!(benches);
