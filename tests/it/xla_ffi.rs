//! The hand-written PJRT declarations against the header shipped with the
//! pinned plugin: every declared struct's `*_STRUCT_SIZE` (offset of the
//! header's last field plus its size, computed here from the header text
//! with the x86-64 C layout rules) equals ours, and `PJRT_Api`'s function
//! entries are the header's, in order.

use crate::support::pjrt as support;

use std::collections::HashMap;

use tpu_rewrite::xla::ffi;

/// The header text without comments.
fn header() -> String {
    let path = support::header_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// (size, align) of a C type named in the header.
fn layout(ty: &str, text: &str, structs: &mut HashMap<String, (usize, usize)>) -> (usize, usize) {
    let ty = ty.trim().trim_start_matches("const ").trim_start_matches("struct ").trim();
    if ty.contains('*') {
        return (8, 8);
    }
    match ty {
        "size_t" | "int64_t" | "uint64_t" | "intptr_t" | "double" => return (8, 8),
        "int" | "int32_t" | "uint32_t" | "float" => return (4, 4),
        "bool" | "char" | "uint8_t" => return (1, 1),
        _ => {}
    }
    if text.contains(&format!("}} {ty};"))
        && text.contains("typedef enum")
        && !text.contains(&format!("struct {ty} {{"))
    {
        return (4, 4);
    }
    if text.contains(&format!("(*{ty})")) {
        return (8, 8);
    }
    let (size, align, _) = struct_layout(ty, text, structs);
    (size, align)
}

/// The fields `(type, name)` of `struct NAME { ... }` in the header.
fn fields(name: &str, text: &str) -> Vec<(String, String)> {
    let start = text.find(&format!("struct {name} {{")).unwrap_or_else(|| panic!("header has no struct {name}"));
    let body_start = start + text[start..].find('{').expect("brace") + 1;
    let mut level = 1;
    let body_end = body_start
        + text[body_start..]
            .char_indices()
            .find(|&(_, c)| {
                level += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                level == 0
            })
            .expect("end of struct")
            .0;
    let body = &text[body_start..body_end];
    let mut out = Vec::new();
    let mut depth = 0;
    for decl in body.split(';') {
        let decl = decl.trim();
        if decl.is_empty() {
            continue;
        }
        if decl.starts_with("union") {
            // The union's members: all 8 bytes or smaller, aligned to 8.
            depth += 1;
            out.push(("int64_t".to_string(), "<union>".to_string()));
            continue;
        }
        if decl.starts_with('}') {
            depth -= 1;
            let rest = decl.trim_start_matches('}').trim();
            if !rest.is_empty() {
                out.push(("size_t".to_string(), rest.to_string()));
            }
            continue;
        }
        if depth > 0 {
            continue;
        }
        if let Some(open) = decl.find("(*") {
            let name_end = decl[open..].find(')').expect("fn ptr") + open;
            out.push(("void*".to_string(), decl[open + 2..name_end].to_string()));
            continue;
        }
        let split = decl.rfind(|c: char| c.is_whitespace() || c == '*').expect("a field");
        out.push((decl[..=split].trim().to_string(), decl[split + 1..].trim().to_string()));
    }
    out
}

/// (sizeof, alignof, STRUCT_SIZE) of a header struct.
fn struct_layout(name: &str, text: &str, cache: &mut HashMap<String, (usize, usize)>) -> (usize, usize, usize) {
    let fs = fields(name, text);
    let last = last_field(name, text);
    let mut offset = 0usize;
    let mut align = 1usize;
    let mut struct_size = None;
    for (ty, field) in &fs {
        let (s, a) = layout(ty, text, cache);
        offset = offset.div_ceil(a) * a;
        align = align.max(a);
        offset += s;
        if *field == last {
            struct_size = Some(offset);
        }
    }
    let size = offset.div_ceil(align) * align;
    cache.insert(name.to_string(), (size, align));
    (size, align, struct_size.unwrap_or_else(|| panic!("{name}: last field {last} not found in {fs:?}")))
}

/// The `last_field` of `PJRT_DEFINE_STRUCT_TRAITS(name, last_field)`.
fn last_field(name: &str, text: &str) -> String {
    let key = format!("PJRT_DEFINE_STRUCT_TRAITS({name},");
    let at = text.find(&key).unwrap_or_else(|| panic!("no struct traits for {name}")) + key.len();
    let end = at + text[at..].find(')').expect(")");
    text[at..end].trim().to_string()
}

#[test]
fn struct_sizes_match_the_header() {
    let text = header();
    let mut cache = HashMap::new();
    let mut checked = 0;
    for &(name, ours, declared_fields) in ffi::STRUCT_SIZES {
        let (_, _, theirs) = struct_layout(name, &text, &mut cache);
        assert_eq!(ours, theirs, "{name}: our STRUCT_SIZE is {ours}, the header's is {theirs}");
        let header_fields = fields(name, &text).len();
        assert_eq!(
            declared_fields, header_fields,
            "{name}: {declared_fields} fields declared, header has {header_fields}"
        );
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} structs checked");
}

#[test]
fn api_entries_match_the_header_in_order() {
    let text = header();
    let entries: Vec<String> = text
        .match_indices("_PJRT_API_STRUCT_FIELD(PJRT_")
        .map(|(at, m)| {
            let rest = &text[at + m.len()..];
            rest[..rest.find(')').expect(")")].to_lowercase()
        })
        .collect();
    let ours: Vec<String> = ffi::API_FIELDS.iter().map(|s| s.to_string()).collect();
    assert_eq!(ours, entries);
    // PJRT_Api_STRUCT_SIZE: the prefix (size, extension, version struct) plus one pointer per entry.
    let mut cache = HashMap::new();
    let (version_size, _, _) = struct_layout("PJRT_Api_Version", &text, &mut cache);
    assert_eq!(ffi::Api::STRUCT_SIZE, 16 + version_size + 8 * entries.len());
    assert!(text.contains(&format!("#define PJRT_API_MAJOR {}", ffi::API_MAJOR)));
    assert!(text.contains(&format!("#define PJRT_API_MINOR {}", ffi::API_MINOR_MIN)));
}

/// The XLA FFI and PJRT FFI extension structs (`src/xla/xla_ffi.rs`): their
/// headers are not in the wheel, so each `*_STRUCT_SIZE` below is worked
/// out by hand from the C definitions in OpenXLA's `xla/ffi/api/c_api.h`
/// and `xla/pjrt/c/pjrt_c_api_ffi_extension.h` (x86-64: pointers and
/// `size_t` 8 bytes, enums and `int` 4, padded to the next field's alignment).
#[test]
fn xla_ffi_struct_sizes_match_the_c_definitions() {
    use tpu_rewrite::xla::xla_ffi::STRUCT_SIZES;
    let want: HashMap<&str, usize> = [
        ("PJRT_Extension_Base", 24),            // size, type (+4), next
        ("PJRT_FFI_Extension", 48),             // base, three entries
        ("PJRT_FFI_Register_Handler_Args", 52), // six 8-byte fields, traits
        ("XLA_FFI_Api_Version", 24),            // size, extension, major, minor
        ("XLA_FFI_Api (head)", 56),             // size, extension, version, internal, Error_Create
        ("XLA_FFI_Error_Create_Args", 28),      // size, extension, message, errc
        ("XLA_FFI_Buffer", 48),                 // size, extension, dtype (+4), data, rank, dims
        ("XLA_FFI_Args", 40),                   // size, extension, size, types, args
        ("XLA_FFI_Rets", 40),                   // as args
        ("XLA_FFI_Attrs", 48),                  // size, extension, size, types, names, attrs
        ("XLA_FFI_CallFrame", 168),             // 4 words, stage (+4), args, rets, attrs
        ("XLA_FFI_Metadata", 36),               // size, version, traits
        ("XLA_FFI_Metadata_Extension", 32),     // base, metadata
    ]
    .into_iter()
    .collect();
    assert_eq!(STRUCT_SIZES.len(), want.len());
    for &(name, ours) in STRUCT_SIZES {
        assert_eq!(Some(&ours), want.get(name), "{name}");
    }
}

/// The plugin's own view: its FFI extension is as large as ours, and it
/// takes a `PJRT_FFI_Register_Handler_Args` of our size but not one byte less.
#[test]
fn the_plugin_agrees_with_the_ffi_extension_layout() {
    use tpu_rewrite::xla::callback;
    use tpu_rewrite::xla::xla_ffi as x;
    let plugin = support::loaded();
    let mut ext = plugin.api().extension_start.cast::<x::ExtensionBase>();
    let mut found = None;
    // SAFETY: the plugin's extension chain of static structs.
    unsafe {
        while !ext.is_null() {
            if (*ext).kind == x::PJRT_EXTENSION_TYPE_FFI {
                found = Some(ext.cast::<x::PjrtFfiExtension>());
            }
            ext = (*ext).next;
        }
    }
    let ffi_ext = found.expect("the CPU plugin has the FFI extension");
    // SAFETY: as above.
    let (size, register) = unsafe { ((*ffi_ext).base.struct_size, (*ffi_ext).register_handler) };
    assert_eq!(size, x::PjrtFfiExtension::STRUCT_SIZE);
    let register = register.expect("register_handler");
    let target = "tpu_rewrite_size_probe";
    for (struct_size, accepted) in
        [(x::RegisterHandlerArgs::STRUCT_SIZE, true), (x::RegisterHandlerArgs::STRUCT_SIZE - 1, false)]
    {
        let mut args = x::RegisterHandlerArgs {
            struct_size,
            target_name: target.as_ptr(),
            target_name_size: target.len(),
            handler: Some(callback::handler),
            platform_name: callback::CPU_PLATFORM.as_ptr(),
            platform_name_size: callback::CPU_PLATFORM.len(),
            traits: 0,
        };
        // SAFETY: valid args for the call.
        let err = unsafe { register(&mut args) };
        let result = ffi::check(&plugin, err);
        assert_eq!(result.is_ok(), accepted, "struct_size {struct_size}: {result:?}");
    }
}
