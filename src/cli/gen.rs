//! `gen`: the synthetic models in every output format (the generator
//! itself is the library's [`tpu_rewrite::synth`]).

pub use tpu_rewrite::synth::{generate, GenConfig};

/// Generates `model` in `format`. The MLP is `.opg` text; as JSON or DOT
/// it is that module converted, and as a GraphDef (`pbtxt`, `pb`) it is the
/// graph after the rewrite passes, flat as TensorFlow's tpu.replicate
/// leaves it. The transformer is a GraphDef, converted for the other
/// formats. An error names the value as the command line spells it.
pub fn generate_as(model: super::GenModel, format: super::EmitFormat, config: &GenConfig) -> Result<Vec<u8>, String> {
    use super::{EmitFormat, GenModel};
    use tpu_rewrite::tf::synth::{layers_for_nodes, transformer_graphdef, TransformerConfig};
    let describe = |errors: Vec<super::diagnostics::AnyDiagnostic>| {
        let names: Vec<String> = errors.iter().take(3).map(|e| e.to_string()).collect();
        format!(
            "the generated {} cannot be written as `{}`: {}",
            clap::ValueEnum::to_possible_value(&model).map_or_else(String::new, |v| v.get_name().to_string()),
            clap::ValueEnum::to_possible_value(&format).map_or_else(String::new, |v| v.get_name().to_string()),
            names.join("; ")
        )
    };
    match model {
        GenModel::Mlp => {
            let text = generate(config);
            if format == EmitFormat::Text {
                return Ok(text.into_bytes());
            }
            let (mut module, _) = tpu_rewrite::ir::parse_module(text.as_bytes())
                .map_err(|e| format!("the generated MLP did not parse: {e}"))?;
            if matches!(format, EmitFormat::Pbtxt | EmitFormat::Pb) {
                let report =
                    tpu_rewrite::passes::run_pipeline(&mut module, &tpu_rewrite::passes::PipelineConfig::default());
                if report.has_errors() {
                    return Err("the rewrite passes failed on the generated MLP".to_string());
                }
            }
            super::formats::emit_bytes(&module, format).map_err(describe)
        }
        GenModel::Transformer => {
            let tc = TransformerConfig { replicas: config.replicas.max(1), ..TransformerConfig::default() };
            let graph_def = transformer_graphdef(layers_for_nodes(config.ops, &tc), &tc);
            match format {
                EmitFormat::Pbtxt => Ok(tpu_rewrite::tf::pbtxt_print::print_graphdef(&graph_def).into_bytes()),
                EmitFormat::Pb => Ok(prost::Message::encode_to_vec(&graph_def)),
                other => {
                    let (module, _) = tpu_rewrite::tf::to_ir::graphdef_to_module(graph_def, None);
                    super::formats::emit_bytes(&module, other).map_err(describe)
                }
            }
        }
    }
}
