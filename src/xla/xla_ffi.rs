//! Hand-written declarations for the part of the XLA FFI C API
//! (`xla/ffi/api/c_api.h`) a host callback needs, and for the PJRT FFI
//! extension (`xla/pjrt/c/pjrt_c_api_ffi_extension.h`) that registers it.
//!
//! Meaning: XLA calls a typed FFI handler with one `XLA_FFI_CallFrame`:
//! the API table (for creating errors), the execution stage, and the
//! arguments, results and attributes of the `stablehlo.custom_call`
//! (`api_version = 4`). Before it registers a handler, XLA calls it once
//! with a frame whose extension chain holds a metadata extension; the
//! handler answers with the FFI API version it was written against.
//!
//! Invariants: every struct here is `#[repr(C)]` and follows the layout of
//! the pinned CPU plugin (XLA FFI API 0.2, PJRT C API 0.81). Those headers
//! are not shipped with the plugin; each `STRUCT_SIZE` is the end of the
//! struct's last field as the C headers define it (the `*_STRUCT_SIZE`
//! macros), and `tests/it/xla_ffi.rs` checks them. The plugin itself refuses
//! a `PJRT_FFI_Register_Handler_Args` smaller than 52 bytes. Cost: none
//! (declarations).

use std::ffi::c_void;

/// The FFI API version tpu-rewrite's handler reports (major, minor).
///
/// XLA refuses to register a handler whose version lies outside its
/// supported range; the pinned plugin's framework is 0.2 and accepts 0.1.
pub const FFI_API_VERSION: (i32, i32) = (0, 1);

/// `PJRT_Extension_Type_FFI`.
pub const PJRT_EXTENSION_TYPE_FFI: i32 = 5;
/// `XLA_FFI_Extension_Metadata`.
pub const XLA_FFI_EXTENSION_METADATA: i32 = 1;
/// `XLA_FFI_ExecutionStage_EXECUTE` (0–2 are instantiate, prepare, initialize).
pub const XLA_FFI_STAGE_EXECUTE: i32 = 3;
/// `XLA_FFI_ArgType_BUFFER` / `XLA_FFI_RetType_BUFFER`.
pub const XLA_FFI_BUFFER: i32 = 1;
/// `XLA_FFI_AttrType_SCALAR`.
pub const XLA_FFI_ATTR_SCALAR: i32 = 3;
/// `XLA_FFI_Error_Code_INTERNAL`.
pub const XLA_FFI_ERROR_INTERNAL: i32 = 13;
/// `XLA_FFI_Error_Code_INVALID_ARGUMENT`.
pub const XLA_FFI_ERROR_INVALID_ARGUMENT: i32 = 3;

/// `XLA_FFI_DataType` values (`xla::PrimitiveType`) of the dtypes a device holds.
pub mod data_type {
    /// `PRED`: booleans.
    pub const PRED: i32 = 1;
    /// `S32`.
    pub const S32: i32 = 4;
    /// `S64`.
    pub const S64: i32 = 5;
    /// `F32`.
    pub const F32: i32 = 11;
    /// `F64`.
    pub const F64: i32 = 12;
}

/// An opaque XLA FFI object (`XLA_FFI_Error`, `XLA_FFI_ExecutionContext`).
#[repr(C)]
pub struct Opaque {
    _private: [u8; 0],
}

/// `XLA_FFI_Handler`: the function XLA calls for a custom call.
pub type Handler = unsafe extern "C" fn(frame: *mut CallFrame) -> *mut Opaque;

/// Declares structs with their `STRUCT_SIZE` (the end of `last`).
macro_rules! ffi_structs {
    ($( $(#[$doc:meta])* $name:ident = $cname:literal, last $last:ident {
        $( $field:ident : $ty:ty ),* $(,)?
    } )*) => {
        $(
            $(#[$doc])*
            #[repr(C)]
            #[derive(Debug, Clone, Copy)]
            pub struct $name {
                $( #[doc = concat!("The C struct's `", stringify!($field), "` field.")] pub $field: $ty, )*
            }
            impl $name {
                /// `*_STRUCT_SIZE`: the end of the last field the header names.
                pub const STRUCT_SIZE: usize =
                    std::mem::offset_of!($name, $last) + super::ffi::size_of_field(|s: &$name| &s.$last);
            }
        )*
        /// (C struct name, our `STRUCT_SIZE`) for every declared struct.
        pub const STRUCT_SIZES: &[(&str, usize)] = &[ $( ($cname, $name::STRUCT_SIZE), )* ];
    };
}

ffi_structs! {
    /// `PJRT_Extension_Base` (also `XLA_FFI_Extension_Base`: same layout).
    ExtensionBase = "PJRT_Extension_Base", last next {
        struct_size: usize, kind: i32, next: *mut ExtensionBase,
    }
    /// `PJRT_FFI_Extension`: the base, then three entries.
    PjrtFfiExtension = "PJRT_FFI_Extension", last register_handler {
        base: ExtensionBase, type_id_register: *const c_void, user_data_add: *const c_void,
        register_handler: Option<unsafe extern "C" fn(*mut RegisterHandlerArgs) -> *mut super::ffi::Error>,
    }
    /// `PJRT_FFI_Register_Handler_Args` (typed handlers only: no `api_version` field).
    RegisterHandlerArgs = "PJRT_FFI_Register_Handler_Args", last traits {
        struct_size: usize, target_name: *const u8, target_name_size: usize, handler: Option<Handler>,
        platform_name: *const u8, platform_name_size: usize, traits: u32,
    }
    /// `XLA_FFI_Api_Version`.
    ApiVersion = "XLA_FFI_Api_Version", last minor_version {
        struct_size: usize, extension_start: *mut ExtensionBase, major_version: i32, minor_version: i32,
    }
    /// `XLA_FFI_Api`: its head and the first entry, `XLA_FFI_Error_Create`.
    ApiHead = "XLA_FFI_Api (head)", last error_create {
        struct_size: usize, extension_start: *mut ExtensionBase, api_version: ApiVersion,
        internal_api: *const c_void,
        error_create: Option<unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut Opaque>,
    }
    /// `XLA_FFI_Error_Create_Args`.
    ErrorCreateArgs = "XLA_FFI_Error_Create_Args", last errc {
        struct_size: usize, extension_start: *mut ExtensionBase, message: *const u8, errc: i32,
    }
    /// `XLA_FFI_Buffer`.
    Buffer = "XLA_FFI_Buffer", last dims {
        struct_size: usize, extension_start: *mut ExtensionBase, dtype: i32, data: *mut c_void, rank: i64,
        dims: *const i64,
    }
    /// `XLA_FFI_Args`.
    Args = "XLA_FFI_Args", last args {
        struct_size: usize, extension_start: *mut ExtensionBase, size: i64, types: *const i32,
        args: *const *mut c_void,
    }
    /// `XLA_FFI_Rets`.
    Rets = "XLA_FFI_Rets", last rets {
        struct_size: usize, extension_start: *mut ExtensionBase, size: i64, types: *const i32,
        rets: *const *mut c_void,
    }
    /// `XLA_FFI_Attrs` (sorted by name).
    Attrs = "XLA_FFI_Attrs", last attrs {
        struct_size: usize, extension_start: *mut ExtensionBase, size: i64, types: *const i32,
        names: *const *const ByteSpan, attrs: *const *mut c_void,
    }
    /// `XLA_FFI_CallFrame` (its `STRUCT_SIZE` ends at `attrs`; `future` follows).
    CallFrame = "XLA_FFI_CallFrame", last attrs {
        struct_size: usize, extension_start: *mut ExtensionBase, api: *const ApiHead, ctx: *mut Opaque,
        stage: i32, args: Args, rets: Rets, attrs: Attrs,
    }
    /// `XLA_FFI_Metadata` (XLA 0.2 appends `state_type_id`; only the
    /// fields up to `traits` are written, after checking `struct_size`).
    Metadata = "XLA_FFI_Metadata", last traits {
        struct_size: usize, api_version: ApiVersion, traits: u32,
    }
    /// `XLA_FFI_Metadata_Extension`.
    MetadataExtension = "XLA_FFI_Metadata_Extension", last metadata {
        extension_base: ExtensionBase, metadata: *mut Metadata,
    }
}

/// `XLA_FFI_ByteSpan`: a string that need not end in NUL.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ByteSpan {
    /// The first byte.
    pub ptr: *const u8,
    /// The length in bytes.
    pub len: usize,
}

/// `XLA_FFI_Scalar`: a scalar attribute.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Scalar {
    /// Its `XLA_FFI_DataType`.
    pub dtype: i32,
    /// The value, of that type.
    pub value: *const c_void,
}
