//! Hand-written declarations for the subset of the PJRT C API that the
//! backend calls, and the plugin loader.
//!
//! Meaning: every `PJRT_*_Args` struct starts with `struct_size` and
//! `extension_start`; a caller sets `struct_size` to the size it knows (the
//! offset of its last field plus that field's size, `*_STRUCT_SIZE` in
//! `pjrt_c_api.h`), which lets older and newer plugins read it safely. The
//! declarations follow `pjrt_c_api.h` of PJRT C API 0.81 (the header shipped
//! in the `xla-cpu-pjrt` wheel); `tests/it/xla_ffi.rs` parses that header and
//! checks every size here against it.
//!
//! Invariants: [`Api`] is only used after [`load`] checked that the plugin's
//! major version is [`API_MAJOR`], its minor version is at least
//! [`API_MINOR_MIN`], its `PJRT_Api` is at least as large as ours, and every
//! function the backend calls is present. Cost: loading is one `dlopen`.

use std::ffi::c_void;
use std::path::Path;

use super::error::XlaError;

/// The major version of the C API these declarations follow.
pub const API_MAJOR: i32 = 0;
/// The oldest minor version whose structs match these declarations.
pub const API_MINOR_MIN: i32 = 81;

/// An opaque plugin object.
#[repr(C)]
pub struct Opaque {
    _private: [u8; 0],
}

/// A `PJRT_Error`: a failure the plugin reports.
pub type Error = Opaque;
/// A `PJRT_Client`: the plugin's connection to its devices.
pub type Client = Opaque;
/// A `PJRT_Device`: one device of a client.
pub type Device = Opaque;
/// A `PJRT_DeviceDescription`: a device's kind and attributes.
pub type DeviceDescription = Opaque;
/// A `PJRT_LoadedExecutable`: a compiled program loaded on devices.
pub type LoadedExecutable = Opaque;
/// A `PJRT_Executable`: a compiled program.
pub type Executable = Opaque;
/// A `PJRT_Buffer`: a tensor on a device.
pub type Buffer = Opaque;
/// A `PJRT_Event`: the completion of an asynchronous operation.
pub type Event = Opaque;

/// A C API function: one argument struct in, an error (or null) out.
pub type Fn = unsafe extern "C" fn(args: *mut c_void) -> *mut Error;

/// The size a struct reports in `struct_size`: the end of its last field.
macro_rules! struct_size {
    ($t:ty, $last:ident) => {
        std::mem::offset_of!($t, $last) + size_of_field(|s: &$t| &s.$last)
    };
}

/// The size of a field, through a projection (no value needed).
pub const fn size_of_field<S, F>(_: fn(&S) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// Declares argument structs: `#[repr(C)]`, a `STRUCT_SIZE` constant per
/// struct, and [`STRUCT_SIZES`], the table the header test checks.
macro_rules! c_structs {
    ($( $(#[$doc:meta])* $name:ident = $cname:literal, last $last:ident {
        $( $field:ident : $ty:ty ),* $(,)?
    } )*) => {
        $(
            $(#[$doc])*
            #[repr(C)]
            #[derive(Debug)]
            pub struct $name {
                $( #[doc = concat!("The header's `", stringify!($field), "` field.")] pub $field: $ty, )*
            }
            impl $name {
                /// `*_STRUCT_SIZE`: the end of the last field the header names.
                pub const STRUCT_SIZE: usize = struct_size!($name, $last);
                /// A zeroed value with `struct_size` set.
                pub fn new() -> Self {
                    // SAFETY: every field is an integer, a raw pointer, an
                    // Option of a function pointer or a plain struct of those,
                    // for all of which the all-zero bit pattern is valid.
                    let mut v: Self = unsafe { std::mem::zeroed() };
                    v.struct_size = Self::STRUCT_SIZE;
                    v
                }
            }
            impl Default for $name {
                fn default() -> Self {
                    Self::new()
                }
            }
        )*
        /// (C struct name, our `STRUCT_SIZE`, declared field count) for every declared struct.
        pub const STRUCT_SIZES: &[(&str, usize, usize)] = &[
            $( ($cname, $name::STRUCT_SIZE, [$(stringify!($field)),*].len()), )*
        ];
    };
}

type Ext = *mut c_void;

c_structs! {
    /// `PJRT_Api_Version`.
    ApiVersion = "PJRT_Api_Version", last minor_version {
        struct_size: usize, extension_start: Ext, major_version: i32, minor_version: i32,
    }
    /// `PJRT_Error_Destroy_Args`.
    ErrorDestroyArgs = "PJRT_Error_Destroy_Args", last error {
        struct_size: usize, extension_start: Ext, error: *mut Error,
    }
    /// `PJRT_Error_Message_Args`.
    ErrorMessageArgs = "PJRT_Error_Message_Args", last message_size {
        struct_size: usize, extension_start: Ext, error: *const Error, message: *const u8,
        message_size: usize,
    }
    /// `PJRT_Error_GetCode_Args`.
    ErrorGetCodeArgs = "PJRT_Error_GetCode_Args", last code {
        struct_size: usize, extension_start: Ext, error: *const Error, code: i32,
    }
    /// `PJRT_NamedValue` (the union is read as its widest member).
    NamedValue = "PJRT_NamedValue", last value_size {
        struct_size: usize, extension_start: Ext, name: *const u8, name_size: usize,
        kind: i32, value: i64, value_size: usize,
    }
    /// `PJRT_Plugin_Initialize_Args`.
    PluginInitializeArgs = "PJRT_Plugin_Initialize_Args", last extension_start {
        struct_size: usize, extension_start: Ext,
    }
    /// `PJRT_Event_Destroy_Args`.
    EventDestroyArgs = "PJRT_Event_Destroy_Args", last event {
        struct_size: usize, extension_start: Ext, event: *mut Event,
    }
    /// `PJRT_Event_Await_Args`.
    EventAwaitArgs = "PJRT_Event_Await_Args", last event {
        struct_size: usize, extension_start: Ext, event: *mut Event,
    }
    /// `PJRT_Client_Create_Args`.
    ClientCreateArgs = "PJRT_Client_Create_Args", last kv_try_get_user_arg {
        struct_size: usize, extension_start: Ext, create_options: *const NamedValue,
        num_options: usize, kv_get_callback: *mut c_void, kv_get_user_arg: *mut c_void,
        kv_put_callback: *mut c_void, kv_put_user_arg: *mut c_void, client: *mut Client,
        kv_try_get_callback: *mut c_void, kv_try_get_user_arg: *mut c_void,
    }
    /// `PJRT_Client_Destroy_Args`.
    ClientDestroyArgs = "PJRT_Client_Destroy_Args", last client {
        struct_size: usize, extension_start: Ext, client: *mut Client,
    }
    /// `PJRT_Client_PlatformName_Args`.
    ClientPlatformNameArgs = "PJRT_Client_PlatformName_Args", last platform_name_size {
        struct_size: usize, extension_start: Ext, client: *mut Client, platform_name: *const u8,
        platform_name_size: usize,
    }
    /// `PJRT_Client_AddressableDevices_Args`.
    ClientAddressableDevicesArgs = "PJRT_Client_AddressableDevices_Args", last num_addressable_devices {
        struct_size: usize, extension_start: Ext, client: *mut Client,
        addressable_devices: *const *mut Device, num_addressable_devices: usize,
    }
    /// `PJRT_Program`.
    Program = "PJRT_Program", last format_size {
        struct_size: usize, extension_start: Ext, code: *mut u8, code_size: usize,
        format: *const u8, format_size: usize,
    }
    /// `PJRT_Client_Compile_Args`.
    ClientCompileArgs = "PJRT_Client_Compile_Args", last executable {
        struct_size: usize, extension_start: Ext, client: *mut Client, program: *const Program,
        compile_options: *const u8, compile_options_size: usize, executable: *mut LoadedExecutable,
    }
    /// `PJRT_Client_BufferFromHostBuffer_Args`.
    BufferFromHostBufferArgs = "PJRT_Client_BufferFromHostBuffer_Args", last buffer {
        struct_size: usize, extension_start: Ext, client: *mut Client, data: *const c_void,
        kind: i32, dims: *const i64, num_dims: usize, byte_strides: *const i64,
        num_byte_strides: usize, host_buffer_semantics: i32, device: *mut Device,
        memory: *mut c_void, device_layout: *mut c_void, done_with_host_buffer: *mut Event,
        buffer: *mut Buffer,
    }
    /// `PJRT_DeviceDescription_Kind_Args`.
    DeviceDescriptionKindArgs = "PJRT_DeviceDescription_Kind_Args", last device_kind_size {
        struct_size: usize, extension_start: Ext, device_description: *mut DeviceDescription,
        device_kind: *const u8, device_kind_size: usize,
    }
    /// `PJRT_Device_GetDescription_Args`.
    DeviceGetDescriptionArgs = "PJRT_Device_GetDescription_Args", last device_description {
        struct_size: usize, extension_start: Ext, device: *mut Device,
        device_description: *mut DeviceDescription,
    }
    /// `PJRT_Executable_Destroy_Args`.
    ExecutableDestroyArgs = "PJRT_Executable_Destroy_Args", last executable {
        struct_size: usize, extension_start: Ext, executable: *mut Executable,
    }
    /// `PJRT_Executable_NumOutputs_Args`.
    ExecutableNumOutputsArgs = "PJRT_Executable_NumOutputs_Args", last num_outputs {
        struct_size: usize, extension_start: Ext, executable: *mut Executable, num_outputs: usize,
    }
    /// `PJRT_Executable_GetCompiledMemoryStats_Args`.
    ExecutableGetCompiledMemoryStatsArgs = "PJRT_Executable_GetCompiledMemoryStats_Args", last peak_memory_in_bytes {
        struct_size: usize, extension_start: Ext, executable: *mut Executable,
        generated_code_size_in_bytes: i64, argument_size_in_bytes: i64, output_size_in_bytes: i64,
        alias_size_in_bytes: i64, temp_size_in_bytes: i64, host_generated_code_size_in_bytes: i64,
        host_argument_size_in_bytes: i64, host_output_size_in_bytes: i64, host_alias_size_in_bytes: i64,
        host_temp_size_in_bytes: i64, peak_memory_in_bytes: i64,
    }
    /// `PJRT_LoadedExecutable_Destroy_Args`.
    LoadedExecutableDestroyArgs = "PJRT_LoadedExecutable_Destroy_Args", last executable {
        struct_size: usize, extension_start: Ext, executable: *mut LoadedExecutable,
    }
    /// `PJRT_Executable_Serialize_Args`.
    ExecutableSerializeArgs = "PJRT_Executable_Serialize_Args", last serialized_executable_deleter {
        struct_size: usize, extension_start: Ext, executable: *const Executable,
        serialized_bytes: *const u8, serialized_bytes_size: usize, serialized_executable: *mut c_void,
        serialized_executable_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    }
    /// `PJRT_Executable_DeserializeAndLoad_Args`.
    ExecutableDeserializeAndLoadArgs = "PJRT_Executable_DeserializeAndLoad_Args",
        last overridden_serialized_compile_options_size {
        struct_size: usize, extension_start: Ext, client: *mut Client, serialized_executable: *const u8,
        serialized_executable_size: usize, loaded_executable: *mut LoadedExecutable,
        overridden_serialized_compile_options: *const u8, overridden_serialized_compile_options_size: usize,
    }
    /// `PJRT_LoadedExecutable_GetExecutable_Args`.
    LoadedExecutableGetExecutableArgs = "PJRT_LoadedExecutable_GetExecutable_Args", last executable {
        struct_size: usize, extension_start: Ext, loaded_executable: *mut LoadedExecutable,
        executable: *mut Executable,
    }
    /// `PJRT_ExecuteOptions`.
    ExecuteOptions = "PJRT_ExecuteOptions", last incarnation_ids {
        struct_size: usize, extension_start: Ext, send_callbacks: *mut c_void,
        recv_callbacks: *mut c_void, num_send_ops: usize, num_recv_ops: usize, launch_id: i32,
        non_donatable_input_indices: *const i64, num_non_donatable_input_indices: usize,
        context: *mut c_void, call_location: *const u8, num_tasks: usize, task_ids: *mut i32,
        incarnation_ids: *mut i64,
    }
    /// `PJRT_LoadedExecutable_Execute_Args`.
    ExecuteArgs = "PJRT_LoadedExecutable_Execute_Args", last execute_device {
        struct_size: usize, extension_start: Ext, executable: *mut LoadedExecutable,
        options: *mut ExecuteOptions, argument_lists: *const *const *mut Buffer,
        num_devices: usize, num_args: usize, output_lists: *const *mut *mut Buffer,
        device_complete_events: *mut *mut Event, execute_device: *mut Device,
    }
    /// `PJRT_Buffer_Destroy_Args`.
    BufferDestroyArgs = "PJRT_Buffer_Destroy_Args", last buffer {
        struct_size: usize, extension_start: Ext, buffer: *mut Buffer,
    }
    /// `PJRT_Buffer_ElementType_Args`.
    BufferElementTypeArgs = "PJRT_Buffer_ElementType_Args", last kind {
        struct_size: usize, extension_start: Ext, buffer: *mut Buffer, kind: i32,
    }
    /// `PJRT_Buffer_Dimensions_Args`.
    BufferDimensionsArgs = "PJRT_Buffer_Dimensions_Args", last num_dims {
        struct_size: usize, extension_start: Ext, buffer: *mut Buffer, dims: *const i64,
        num_dims: usize,
    }
    /// `PJRT_Buffer_ToHostBuffer_Args`.
    BufferToHostBufferArgs = "PJRT_Buffer_ToHostBuffer_Args", last event {
        struct_size: usize, extension_start: Ext, src: *mut Buffer, host_layout: *mut c_void,
        dst: *mut c_void, dst_size: usize, event: *mut Event,
    }
}

/// Declares `PJRT_Api`: the header's fixed prefix, then one function
/// pointer per entry, in header order.
macro_rules! api_struct {
    ($($field:ident),* $(,)?) => {
        /// `PJRT_Api`: the plugin's function table.
        #[repr(C)]
        pub struct Api {
            /// The size of the table the plugin fills, in bytes.
            pub struct_size: usize,
            /// The first extension the plugin offers, if any.
            pub extension_start: Ext,
            /// The C API version the plugin implements.
            pub pjrt_api_version: ApiVersion,
            $( #[doc = concat!("The `", stringify!($field), "` entry point; `None` when the plugin lacks it.")] pub $field: Option<Fn>, )*
        }
        /// The function-pointer entries of [`Api`], in order (header names, lower case).
        pub const API_FIELDS: &[&str] = &[$(stringify!($field)),*];
    };
}

api_struct! {
    error_destroy, error_message, error_getcode, plugin_initialize, plugin_attributes,
    event_destroy, event_isready, event_error, event_await, event_onready, client_create,
    client_destroy, client_platformname, client_processindex, client_platformversion,
    client_devices, client_addressabledevices, client_lookupdevice, client_lookupaddressabledevice,
    client_addressablememories, client_compile, client_defaultdeviceassignment,
    client_bufferfromhostbuffer, devicedescription_id, devicedescription_processindex,
    devicedescription_attributes, devicedescription_kind, devicedescription_debugstring,
    devicedescription_tostring, device_getdescription, device_isaddressable,
    device_localhardwareid, device_addressablememories, device_defaultmemory, device_memorystats,
    memory_id, memory_kind, memory_debugstring, memory_tostring, memory_addressablebydevices,
    executable_destroy, executable_name, executable_numreplicas, executable_numpartitions,
    executable_numoutputs, executable_sizeofgeneratedcodeinbytes, executable_getcostanalysis,
    executable_outputmemorykinds, executable_optimizedprogram, executable_serialize,
    loadedexecutable_destroy, loadedexecutable_getexecutable, loadedexecutable_addressabledevices,
    loadedexecutable_delete, loadedexecutable_isdeleted, loadedexecutable_execute,
    executable_deserializeandload, loadedexecutable_fingerprint, buffer_destroy,
    buffer_elementtype, buffer_dimensions, buffer_unpaddeddimensions,
    buffer_dynamicdimensionindices, buffer_getmemorylayout, buffer_ondevicesizeinbytes,
    buffer_device, buffer_memory, buffer_delete, buffer_isdeleted, buffer_copytodevice,
    buffer_tohostbuffer, buffer_isoncpu, buffer_readyevent, buffer_unsafepointer,
    buffer_increaseexternalreferencecount, buffer_decreaseexternalreferencecount,
    buffer_opaquedevicememorydatapointer, copytodevicestream_destroy, copytodevicestream_addchunk,
    copytodevicestream_totalbytes, copytodevicestream_granulesize, copytodevicestream_currentbytes,
    topologydescription_create, topologydescription_destroy, topologydescription_platformname,
    topologydescription_platformversion, topologydescription_getdevicedescriptions,
    topologydescription_serialize, topologydescription_attributes, compile,
    executable_outputelementtypes, executable_outputdimensions, buffer_copytomemory,
    client_createviewofdevicebuffer, executable_fingerprint, client_topologydescription,
    executable_getcompiledmemorystats, memory_kind_id, executecontext_create,
    executecontext_destroy, buffer_copyrawtohost, asynchosttodevicetransfermanager_destroy,
    asynchosttodevicetransfermanager_transferdata, client_createbuffersforasynchosttodevice,
    asynchosttodevicetransfermanager_retrievebuffer, asynchosttodevicetransfermanager_device,
    asynchosttodevicetransfermanager_buffercount, asynchosttodevicetransfermanager_buffersize,
    asynchosttodevicetransfermanager_setbuffererror, asynchosttodevicetransfermanager_addmetadata,
    client_dmamap, client_dmaunmap, client_createuninitializedbuffer,
    client_updateglobalprocessinfo, topologydescription_deserialize, client_createaliasbuffer,
    client_fulfillaliasbuffer, loadedexecutable_getdeviceassignment,
}

impl Api {
    /// `PJRT_Api_STRUCT_SIZE`.
    pub const STRUCT_SIZE: usize = struct_size!(Api, loadedexecutable_getdeviceassignment);
}

impl Plugin {
    /// An entry past those [`load`] checks, when the plugin's table is
    /// large enough to hold it and fills it.
    pub fn optional_entry(&self, offset: usize, get: fn(&Api) -> Option<Fn>) -> Option<Fn> {
        let api = self.api();
        (api.struct_size >= offset + std::mem::size_of::<Option<Fn>>()).then(|| get(api)).flatten()
    }
}

/// The API functions the backend calls; [`load`] refuses a plugin missing one.
type Entry = fn(&Api) -> Option<Fn>;
const REQUIRED: &[(&str, Entry)] = &[
    ("PJRT_Error_Destroy", |a| a.error_destroy),
    ("PJRT_Error_Message", |a| a.error_message),
    ("PJRT_Error_GetCode", |a| a.error_getcode),
    ("PJRT_Plugin_Initialize", |a| a.plugin_initialize),
    ("PJRT_Event_Destroy", |a| a.event_destroy),
    ("PJRT_Event_Await", |a| a.event_await),
    ("PJRT_Client_Create", |a| a.client_create),
    ("PJRT_Client_Destroy", |a| a.client_destroy),
    ("PJRT_Client_PlatformName", |a| a.client_platformname),
    ("PJRT_Client_AddressableDevices", |a| a.client_addressabledevices),
    ("PJRT_Client_Compile", |a| a.client_compile),
    ("PJRT_Client_BufferFromHostBuffer", |a| a.client_bufferfromhostbuffer),
    ("PJRT_Device_GetDescription", |a| a.device_getdescription),
    ("PJRT_DeviceDescription_Kind", |a| a.devicedescription_kind),
    ("PJRT_Executable_Destroy", |a| a.executable_destroy),
    ("PJRT_Executable_NumOutputs", |a| a.executable_numoutputs),
    ("PJRT_LoadedExecutable_Destroy", |a| a.loadedexecutable_destroy),
    ("PJRT_LoadedExecutable_GetExecutable", |a| a.loadedexecutable_getexecutable),
    ("PJRT_LoadedExecutable_Execute", |a| a.loadedexecutable_execute),
    ("PJRT_Buffer_Destroy", |a| a.buffer_destroy),
    ("PJRT_Buffer_ElementType", |a| a.buffer_elementtype),
    ("PJRT_Buffer_Dimensions", |a| a.buffer_dimensions),
    ("PJRT_Buffer_ToHostBuffer", |a| a.buffer_tohostbuffer),
];

/// `PJRT_Buffer_Type` values the backend uses.
pub mod buffer_type {
    /// `PRED`: booleans.
    pub const PRED: i32 = 1;
    /// `S8`: 8-bit signed integers.
    pub const S8: i32 = 2;
    /// `S16`: 16-bit signed integers.
    pub const S16: i32 = 3;
    /// `S32`: 32-bit signed integers.
    pub const S32: i32 = 4;
    /// `S64`: 64-bit signed integers.
    pub const S64: i32 = 5;
    /// `U8`: 8-bit unsigned integers.
    pub const U8: i32 = 6;
    /// `U16`: 16-bit unsigned integers.
    pub const U16: i32 = 7;
    /// `U32`: 32-bit unsigned integers.
    pub const U32: i32 = 8;
    /// `U64`: 64-bit unsigned integers.
    pub const U64: i32 = 9;
    /// `F16`: 16-bit IEEE floats.
    pub const F16: i32 = 10;
    /// `F32`: 32-bit floats.
    pub const F32: i32 = 11;
    /// `F64`: 64-bit floats.
    pub const F64: i32 = 12;
    /// `BF16`: bfloat16.
    pub const BF16: i32 = 13;
    /// `C64`: complex numbers of two 32-bit floats.
    pub const C64: i32 = 14;
    /// `C128`: complex numbers of two 64-bit floats.
    pub const C128: i32 = 15;
}

/// `PJRT_NamedValue_Type::kInt64`.
pub const NAMED_VALUE_INT64: i32 = 1;
/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`.
pub const HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: i32 = 0;

/// A loaded plugin: the library (kept open) and its checked function table.
pub struct Plugin {
    /// The `PJRT_Api` the plugin returned; valid while `_library` is open.
    api: *const Api,
    /// Never closed: XLA's worker threads outlive any one client, and a
    /// plugin unloaded under them crashes the process at exit.
    _library: std::mem::ManuallyDrop<libloading::Library>,
    /// Where the plugin was loaded from.
    pub path: std::path::PathBuf,
    /// `(major, minor)` the plugin reports.
    pub version: (i32, i32),
}

// SAFETY: the PJRT C API is thread-safe by contract; the table is read-only.
unsafe impl Send for Plugin {}
// SAFETY: as above.
unsafe impl Sync for Plugin {}

impl Plugin {
    /// The checked function table.
    pub fn api(&self) -> &Api {
        // SAFETY: `load` checked the pointer is non-null and the table large
        // enough; the library stays open as long as `self`.
        unsafe { &*self.api }
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin").field("path", &self.path).field("version", &self.version).finish()
    }
}

/// Opens the plugin at `path`, calls `GetPjrtApi` and checks the version,
/// the table size and every function the backend needs; then runs
/// `PJRT_Plugin_Initialize`.
pub fn load(path: &Path) -> Result<Plugin, XlaError> {
    let refuse = |reason: String| XlaError::IncompatiblePlugin { path: path.display().to_string(), reason };
    if !path.is_file() {
        return Err(XlaError::PluginNotFound { path: path.display().to_string() });
    }
    // The plugin reads its log level when it loads.
    super::stderr::quiet_plugin_logging();
    // SAFETY: loading a library runs its initialisers; a PJRT plugin is a
    // shared object built to be loaded this way.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| XlaError::PluginLoad { path: path.display().to_string(), message: e.to_string() })?;
    // SAFETY: `GetPjrtApi` takes no arguments and returns `const PJRT_Api*`.
    let get: libloading::Symbol<unsafe extern "C" fn() -> *const Api> =
        unsafe { library.get(b"GetPjrtApi\0") }.map_err(|e| refuse(format!("it has no `GetPjrtApi` symbol ({e})")))?;
    // SAFETY: as above.
    let api = unsafe { get() };
    if api.is_null() {
        return Err(refuse("`GetPjrtApi` returned null".into()));
    }
    // SAFETY: the first three fields are in every PJRT_Api since 0.1.
    let (size, major, minor) =
        unsafe { ((*api).struct_size, (*api).pjrt_api_version.major_version, (*api).pjrt_api_version.minor_version) };
    if major != API_MAJOR || minor < API_MINOR_MIN {
        return Err(refuse(format!(
            "it implements PJRT C API {major}.{minor}; tpu-rewrite needs {API_MAJOR}.{API_MINOR_MIN} or a later 0.x"
        )));
    }
    // Buffer_ToHostBuffer is the furthest entry in REQUIRED.
    let needed = std::mem::offset_of!(Api, buffer_tohostbuffer) + std::mem::size_of::<Option<Fn>>();
    if size < needed {
        return Err(refuse(format!("its PJRT_Api is {size} bytes, smaller than the {needed} this version must have")));
    }
    // SAFETY: `size` covers every field read below (checked just above
    // for the furthest field in REQUIRED).
    let table = unsafe { &*api };
    if let Some((name, _)) = REQUIRED.iter().find(|(_, get)| get(table).is_none()) {
        return Err(refuse(format!("it does not implement `{name}`")));
    }
    let plugin = Plugin {
        api,
        _library: std::mem::ManuallyDrop::new(library),
        path: path.to_path_buf(),
        version: (major, minor),
    };
    let mut args = PluginInitializeArgs::new();
    // SAFETY: checked present; the args struct is valid for the call.
    let err = unsafe { call(plugin.api().plugin_initialize, &mut args) };
    check(&plugin, err).map_err(|message| refuse(format!("`PJRT_Plugin_Initialize` failed: {message}")))?;
    Ok(plugin)
}

/// Calls an API function (checked present by [`load`]) with `args`.
///
/// # Safety
/// `args` must be the argument struct of that function, with every pointer
/// it holds valid for the call.
pub unsafe fn call<T>(f: Option<Fn>, args: &mut T) -> *mut Error {
    match f {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f((args as *mut T).cast()) },
        None => std::ptr::null_mut(),
    }
}

/// Calls one of the two API functions that return nothing
/// (`PJRT_Error_Destroy`, `PJRT_Error_Message`).
///
/// # Safety
/// As [`call`].
unsafe fn call_void<T>(f: Option<Fn>, args: &mut T) {
    if let Some(f) = f {
        // SAFETY: the entry's C type is `void (*)(Args*)`; only the return
        // type differs from `Fn`, and it is not read.
        let f: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute::<Fn, _>(f) };
        // SAFETY: the caller's contract.
        unsafe { f((args as *mut T).cast()) }
    }
}

/// Turns a returned error into its message (and frees it); null is success.
pub fn check(plugin: &Plugin, err: *mut Error) -> Result<(), String> {
    if err.is_null() {
        return Ok(());
    }
    let api = plugin.api();
    let mut msg = ErrorMessageArgs::new();
    msg.error = err;
    // SAFETY: `err` is a live error from this plugin.
    unsafe { call_void(api.error_message, &mut msg) };
    let text = if msg.message.is_null() {
        String::from("(no message)")
    } else {
        // SAFETY: the plugin returns `message_size` bytes owned by `err`.
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(msg.message, msg.message_size) }).into_owned()
    };
    let mut code = ErrorGetCodeArgs::new();
    code.error = err;
    // SAFETY: as above.
    let code_err = unsafe { call(api.error_getcode, &mut code) };
    let code_name = if code_err.is_null() { error_code_name(code.code) } else { "UNKNOWN" };
    let mut destroy = ErrorDestroyArgs::new();
    destroy.error = err;
    // SAFETY: frees `err` once; not used after.
    unsafe { call_void(api.error_destroy, &mut destroy) };
    Err(format!("{code_name}: {text}"))
}

/// The name of a `PJRT_Error_Code`.
pub fn error_code_name(code: i32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(code).ok().and_then(|c| NAMES.get(c)).copied().unwrap_or("UNKNOWN")
}
