//! A PJRT client over a loaded plugin: devices, compilation, buffers,
//! execution.
//!
//! Meaning: [`Client`] owns one `PJRT_Client`; [`Executable`] one loaded
//! executable; [`DeviceBuffer`] one device buffer. Each frees its object on
//! drop. Every failing call becomes an [`XlaError`] that names the call and
//! the program and carries the plugin's message.
//!
//! Invariants: objects never outlive the plugin (each holds an `Arc` of it);
//! a buffer passed to an execution whose program aliases it (a variable) is
//! donated and must not be read again, so [`Executable::execute`] takes the
//! arguments by value. Cost: one host copy per transfer each way.

use std::ffi::c_void;
use std::sync::Arc;

use super::cache::{CacheUse, CompileCache, Lookup};
use super::error::XlaError;
use super::ffi::{self, call, check, Plugin};
use super::proto;
use crate::exec::Tensor;
use crate::ir::DType;

/// Settings of a client.
#[derive(Clone, Debug, Default)]
pub struct ClientConfig {
    /// Devices to ask a CPU plugin for (`cpu_device_count`); `None` for
    /// plugins that do not take the option (TPU, GPU).
    pub cpu_device_count: Option<usize>,
}

/// A PJRT client.
pub struct Client {
    plugin: Arc<Plugin>,
    raw: *mut ffi::Client,
    devices: Vec<*mut ffi::Device>,
    /// The platform name the plugin reports (`cpu`, `tpu`, `cuda`).
    pub platform: String,
}

// SAFETY: PJRT clients are thread-safe by the C API's contract.
unsafe impl Send for Client {}
// SAFETY: as above.
unsafe impl Sync for Client {}

/// Maps a plugin error of `call` on `program` to an [`XlaError`].
fn pjrt(plugin: &Plugin, err: *mut ffi::Error, what: &str, program: &str) -> Result<(), XlaError> {
    check(plugin, err).map_err(|message| super::device_check::classify(what, program, message))
}

impl Client {
    /// Creates a client on `plugin`.
    pub fn new(plugin: Arc<Plugin>, config: &ClientConfig) -> Result<Client, XlaError> {
        let api = plugin.api();
        let name = "cpu_device_count";
        let mut options = Vec::new();
        if let Some(n) = config.cpu_device_count {
            let mut v = ffi::NamedValue::new();
            v.name = name.as_ptr();
            v.name_size = name.len();
            v.kind = ffi::NAMED_VALUE_INT64;
            v.value = n as i64;
            v.value_size = 1;
            options.push(v);
        }
        let mut args = ffi::ClientCreateArgs::new();
        args.create_options = options.as_ptr();
        args.num_options = options.len();
        // SAFETY: `options` and `name` outlive the call.
        let err = unsafe { call(api.client_create, &mut args) };
        pjrt(&plugin, err, "Client_Create", "the client")?;
        let raw = args.client;
        let mut client = Client { plugin: plugin.clone(), raw, devices: Vec::new(), platform: String::new() };

        let mut name_args = ffi::ClientPlatformNameArgs::new();
        name_args.client = raw;
        // SAFETY: `raw` is a live client.
        let err = unsafe { call(api.client_platformname, &mut name_args) };
        pjrt(&plugin, err, "Client_PlatformName", "the client")?;
        // SAFETY: the plugin returns `platform_name_size` bytes owned by the client.
        client.platform = unsafe { bytes(name_args.platform_name, name_args.platform_name_size) };

        let mut dev_args = ffi::ClientAddressableDevicesArgs::new();
        dev_args.client = raw;
        // SAFETY: as above.
        let err = unsafe { call(api.client_addressabledevices, &mut dev_args) };
        pjrt(&plugin, err, "Client_AddressableDevices", "the client")?;
        if !dev_args.addressable_devices.is_null() {
            // SAFETY: the plugin returns `num_addressable_devices` pointers owned by the client.
            client.devices = unsafe {
                std::slice::from_raw_parts(dev_args.addressable_devices, dev_args.num_addressable_devices).to_vec()
            };
        }
        Ok(client)
    }

    /// The plugin the client runs on.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// Addressable devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// The kind of device `i` (`cpu`, `TPU v4`, ...).
    pub fn device_kind(&self, i: usize) -> Result<String, XlaError> {
        let api = self.plugin.api();
        let mut d = ffi::DeviceGetDescriptionArgs::new();
        d.device = self.devices[i];
        // SAFETY: a device of this client.
        let err = unsafe { call(api.device_getdescription, &mut d) };
        pjrt(&self.plugin, err, "Device_GetDescription", "the client")?;
        let mut k = ffi::DeviceDescriptionKindArgs::new();
        k.device_description = d.device_description;
        // SAFETY: the description just returned.
        let err = unsafe { call(api.devicedescription_kind, &mut k) };
        pjrt(&self.plugin, err, "DeviceDescription_Kind", "the client")?;
        // SAFETY: owned by the description.
        Ok(unsafe { bytes(k.device_kind, k.device_kind_size) })
    }

    /// Compiles MLIR text (`stablehlo`) for `num_replicas` x
    /// `num_partitions` devices; replica r, partition p runs on device
    /// `r * num_partitions + p`. `name` names the program in errors.
    pub fn compile(
        &self,
        name: &str,
        mlir: &str,
        num_replicas: usize,
        num_partitions: usize,
    ) -> Result<Executable, XlaError> {
        let needed = num_replicas * num_partitions;
        if needed > self.devices.len() {
            return Err(XlaError::Devices {
                program: name.into(),
                needed,
                available: self.devices.len(),
                platform: self.platform.clone(),
            });
        }
        let options = self.options(num_replicas, num_partitions);
        let mut code = mlir.as_bytes().to_vec();
        let format = "mlir";
        let mut program = ffi::Program::new();
        program.code = code.as_mut_ptr();
        program.code_size = code.len();
        program.format = format.as_ptr();
        program.format_size = format.len();
        let mut args = ffi::ClientCompileArgs::new();
        args.client = self.raw;
        args.program = &program;
        args.compile_options = options.as_ptr();
        args.compile_options_size = options.len();
        let api = self.plugin.api();
        // SAFETY: `code`, `program` and `options` outlive the call.
        let err = unsafe { call(api.client_compile, &mut args) };
        check(&self.plugin, err).map_err(|message| XlaError::Compile { program: name.into(), message })?;
        self.loaded(args.executable, name, needed)
    }

    /// Compiles as [`Client::compile`], through the on-disk `cache` when
    /// one is given: a stored executable for the same module, plugin and
    /// options is loaded instead of compiled, and a fresh compile is
    /// stored. A cache entry that cannot be used (corrupt, written by
    /// another plugin build) is compiled afresh and replaced; the returned
    /// [`CacheUse`] says which happened.
    pub fn compile_cached(
        &self,
        name: &str,
        mlir: &str,
        num_replicas: usize,
        num_partitions: usize,
        cache: Option<&CompileCache>,
    ) -> Result<(Executable, CacheUse), XlaError> {
        let Some(cache) = cache else {
            return Ok((self.compile(name, mlir, num_replicas, num_partitions)?, CacheUse::Off));
        };
        let options = self.options(num_replicas, num_partitions);
        let key = cache.key(&self.plugin, &self.platform, self.devices.len(), mlir, &options);
        let mut note = None;
        match cache.load(&key) {
            Lookup::Hit(bytes) => match self.deserialize(name, &bytes, num_replicas * num_partitions) {
                Ok(exe) => return Ok((exe, CacheUse::Hit { key })),
                Err(e) => note = Some(format!("the plugin could not load it ({e})")),
            },
            Lookup::Unusable(why) => note = Some(why),
            Lookup::Miss => {}
        }
        let exe = self.compile(name, mlir, num_replicas, num_partitions)?;
        let stored = self.serialize(&exe).and_then(|bytes| {
            cache.store(&key, &bytes).map_err(|message| XlaError::Pjrt {
                call: "writing the compile cache".into(),
                program: name.into(),
                message,
            })
        });
        let stored = stored.err().map(|e| e.to_string());
        Ok((exe, CacheUse::Miss { key, recovered: note, not_stored: stored }))
    }

    /// The serialized `CompileOptionsProto` of a program on `num_replicas`
    /// x `num_partitions` devices (replica r, partition p on device
    /// `r * num_partitions + p`).
    fn options(&self, num_replicas: usize, num_partitions: usize) -> Vec<u8> {
        let ids: Vec<Vec<i64>> =
            (0..num_replicas).map(|r| (0..num_partitions).map(|p| (r * num_partitions + p) as i64).collect()).collect();
        proto::compile_options(num_replicas, num_partitions, &ids)
    }

    /// The plugin's serialization of a compiled executable
    /// (`PJRT_Executable_Serialize`), for [`Client::deserialize`] by the
    /// same plugin build.
    pub fn serialize(&self, exe: &Executable) -> Result<Vec<u8>, XlaError> {
        let api = self.plugin.api();
        if api.executable_serialize.is_none() {
            return Err(XlaError::Pjrt {
                call: "PJRT_Executable_Serialize".into(),
                program: exe.name.clone(),
                message: "the plugin does not implement it".into(),
            });
        }
        let mut get = ffi::LoadedExecutableGetExecutableArgs::new();
        get.loaded_executable = exe.raw;
        // SAFETY: a live loaded executable.
        let err = unsafe { call(api.loadedexecutable_getexecutable, &mut get) };
        pjrt(&self.plugin, err, "LoadedExecutable_GetExecutable", &exe.name)?;
        let mut args = ffi::ExecutableSerializeArgs::new();
        args.executable = get.executable;
        // SAFETY: the executable just returned; the outputs are filled by the plugin.
        let err = unsafe { call(api.executable_serialize, &mut args) };
        let result = pjrt(&self.plugin, err, "Executable_Serialize", &exe.name).map(|()| {
            if args.serialized_bytes.is_null() {
                Vec::new()
            } else {
                // SAFETY: `serialized_bytes_size` bytes live until the deleter runs below.
                unsafe { std::slice::from_raw_parts(args.serialized_bytes, args.serialized_bytes_size) }.to_vec()
            }
        });
        if let (Some(deleter), false) = (args.serialized_executable_deleter, args.serialized_executable.is_null()) {
            // SAFETY: the plugin's deleter, called once on the object it returned.
            unsafe { deleter(args.serialized_executable) };
        }
        let mut destroy = ffi::ExecutableDestroyArgs::new();
        destroy.executable = get.executable;
        // SAFETY: GetExecutable hands the caller a reference to free.
        let destroy_err = unsafe { call(api.executable_destroy, &mut destroy) };
        pjrt(&self.plugin, destroy_err, "Executable_Destroy", &exe.name)?;
        result
    }

    /// Loads an executable that [`Client::serialize`] wrote
    /// (`PJRT_Executable_DeserializeAndLoad`), for `devices` devices.
    pub fn deserialize(&self, name: &str, bytes: &[u8], devices: usize) -> Result<Executable, XlaError> {
        if devices > self.devices.len() {
            return Err(XlaError::Devices {
                program: name.into(),
                needed: devices,
                available: self.devices.len(),
                platform: self.platform.clone(),
            });
        }
        let api = self.plugin.api();
        if api.executable_deserializeandload.is_none() {
            return Err(XlaError::Pjrt {
                call: "PJRT_Executable_DeserializeAndLoad".into(),
                program: name.into(),
                message: "the plugin does not implement it".into(),
            });
        }
        let mut args = ffi::ExecutableDeserializeAndLoadArgs::new();
        args.client = self.raw;
        args.serialized_executable = bytes.as_ptr();
        args.serialized_executable_size = bytes.len();
        // SAFETY: `bytes` outlives the call.
        let err = unsafe { call(api.executable_deserializeandload, &mut args) };
        pjrt(&self.plugin, err, "Executable_DeserializeAndLoad", name)?;
        self.loaded(args.loaded_executable, name, devices)
    }

    /// Wraps a loaded executable the plugin returned and reads its output count.
    fn loaded(&self, raw: *mut ffi::LoadedExecutable, name: &str, devices: usize) -> Result<Executable, XlaError> {
        let api = self.plugin.api();
        let mut exe = Executable { plugin: self.plugin.clone(), raw, name: name.to_string(), num_outputs: 0, devices };
        let mut get = ffi::LoadedExecutableGetExecutableArgs::new();
        get.loaded_executable = exe.raw;
        // SAFETY: a live loaded executable.
        let err = unsafe { call(api.loadedexecutable_getexecutable, &mut get) };
        pjrt(&self.plugin, err, "LoadedExecutable_GetExecutable", name)?;
        let mut n = ffi::ExecutableNumOutputsArgs::new();
        n.executable = get.executable;
        // SAFETY: the executable just returned.
        let err = unsafe { call(api.executable_numoutputs, &mut n) };
        let mut destroy = ffi::ExecutableDestroyArgs::new();
        destroy.executable = get.executable;
        // SAFETY: GetExecutable hands the caller a reference to free.
        let destroy_err = unsafe { call(api.executable_destroy, &mut destroy) };
        pjrt(&self.plugin, err, "Executable_NumOutputs", name)?;
        pjrt(&self.plugin, destroy_err, "Executable_Destroy", name)?;
        exe.num_outputs = n.num_outputs;
        Ok(exe)
    }

    /// Copies `tensor` to device `device`.
    pub fn to_device(&self, tensor: &Tensor, device: usize, what: &str) -> Result<DeviceBuffer, XlaError> {
        let (kind, data) = host_bytes(tensor, what)?;
        let dims: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
        let mut args = ffi::BufferFromHostBufferArgs::new();
        args.client = self.raw;
        args.data = data.as_ptr().cast();
        args.kind = kind;
        args.dims = dims.as_ptr();
        args.num_dims = dims.len();
        args.host_buffer_semantics = ffi::HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL;
        args.device = *self.devices.get(device).ok_or_else(|| XlaError::Devices {
            program: what.into(),
            needed: device + 1,
            available: self.devices.len(),
            platform: self.platform.clone(),
        })?;
        let api = self.plugin.api();
        // SAFETY: `data` and `dims` outlive the call (the semantics copy them during it).
        let err = unsafe { call(api.client_bufferfromhostbuffer, &mut args) };
        pjrt(&self.plugin, err, "Client_BufferFromHostBuffer", what)?;
        let buffer = DeviceBuffer { plugin: self.plugin.clone(), raw: args.buffer };
        if !args.done_with_host_buffer.is_null() {
            await_event(&self.plugin, args.done_with_host_buffer, what)?;
        }
        Ok(buffer)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut args = ffi::ClientDestroyArgs::new();
        args.client = self.raw;
        // SAFETY: destroyed once; buffers and executables hold the plugin, not the client,
        // and are dropped before their client by every caller in this crate.
        let err = unsafe { call(self.plugin.api().client_destroy, &mut args) };
        let _ = check(&self.plugin, err);
    }
}

/// Waits for `event` and frees it.
fn await_event(plugin: &Plugin, event: *mut ffi::Event, what: &str) -> Result<(), XlaError> {
    let api = plugin.api();
    let mut args = ffi::EventAwaitArgs::new();
    args.event = event;
    // SAFETY: a live event.
    let err = unsafe { call(api.event_await, &mut args) };
    let mut destroy = ffi::EventDestroyArgs::new();
    destroy.event = event;
    // SAFETY: freed once, after the wait.
    let destroy_err = unsafe { call(api.event_destroy, &mut destroy) };
    pjrt(plugin, err, "Event_Await", what)?;
    pjrt(plugin, destroy_err, "Event_Destroy", what)
}

/// Copies `size` bytes at `ptr` into a string.
///
/// # Safety
/// `ptr` must point to `size` readable bytes (or be null).
unsafe fn bytes(ptr: *const u8, size: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(ptr, size) }).into_owned()
}

/// The PJRT element type and row-major bytes of a host tensor.
pub(crate) fn host_bytes(tensor: &Tensor, what: &str) -> Result<(i32, Vec<u8>), XlaError> {
    fn raw<T: Copy>(values: Vec<T>, to: fn(T) -> Vec<u8>) -> Vec<u8> {
        values.into_iter().flat_map(to).collect()
    }
    Ok(match tensor {
        Tensor::F32(a) => (ffi::buffer_type::F32, raw(a.iter().copied().collect(), |v: f32| v.to_le_bytes().to_vec())),
        Tensor::F64(a) => (ffi::buffer_type::F64, raw(a.iter().copied().collect(), |v: f64| v.to_le_bytes().to_vec())),
        Tensor::I32(a) => (ffi::buffer_type::S32, raw(a.iter().copied().collect(), |v: i32| v.to_le_bytes().to_vec())),
        Tensor::I64(a) => (ffi::buffer_type::S64, raw(a.iter().copied().collect(), |v: i64| v.to_le_bytes().to_vec())),
        Tensor::Bool(a) => (ffi::buffer_type::PRED, a.iter().map(|&b| u8::from(b)).collect()),
        Tensor::BF16(a) => (ffi::buffer_type::BF16, a.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()),
        Tensor::F16(a) => (ffi::buffer_type::F16, a.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()),
        Tensor::I8(a) => (ffi::buffer_type::S8, a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Tensor::U8(a) => (ffi::buffer_type::U8, a.iter().copied().collect()),
        Tensor::I16(a) => (ffi::buffer_type::S16, a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Tensor::U16(a) => (ffi::buffer_type::U16, a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Tensor::U32(a) => (ffi::buffer_type::U32, raw(a.iter().copied().collect(), |v: u32| v.to_le_bytes().to_vec())),
        Tensor::U64(a) => (ffi::buffer_type::U64, raw(a.iter().copied().collect(), |v: u64| v.to_le_bytes().to_vec())),
        Tensor::C64(a) => {
            (ffi::buffer_type::C64, a.iter().flat_map(|v| [v.re, v.im]).flat_map(f32::to_le_bytes).collect())
        }
        Tensor::C128(a) => {
            (ffi::buffer_type::C128, a.iter().flat_map(|v| [v.re, v.im]).flat_map(f64::to_le_bytes).collect())
        }
        other => return Err(XlaError::DType { what: what.into(), dtype: other.dtype().to_string() }),
    })
}

/// The dtype of a PJRT element type.
pub fn dtype_of(kind: i32) -> Option<DType> {
    match kind {
        ffi::buffer_type::F32 => Some(DType::F32),
        ffi::buffer_type::F64 => Some(DType::F64),
        ffi::buffer_type::S32 => Some(DType::I32),
        ffi::buffer_type::S64 => Some(DType::I64),
        ffi::buffer_type::PRED => Some(DType::Bool),
        ffi::buffer_type::BF16 => Some(DType::BF16),
        ffi::buffer_type::F16 => Some(DType::F16),
        ffi::buffer_type::S8 => Some(DType::I8),
        ffi::buffer_type::U8 => Some(DType::U8),
        ffi::buffer_type::S16 => Some(DType::I16),
        ffi::buffer_type::U16 => Some(DType::U16),
        ffi::buffer_type::U32 => Some(DType::U32),
        ffi::buffer_type::U64 => Some(DType::U64),
        ffi::buffer_type::C64 => Some(DType::C64),
        ffi::buffer_type::C128 => Some(DType::C128),
        _ => None,
    }
}

/// A compiled, loaded program.
pub struct Executable {
    plugin: Arc<Plugin>,
    raw: *mut ffi::LoadedExecutable,
    /// The program's name, for errors.
    pub name: String,
    /// Outputs per device.
    pub num_outputs: usize,
    /// Devices it runs on (replicas x partitions).
    pub devices: usize,
}

// SAFETY: loaded executables are thread-safe by the C API's contract.
unsafe impl Send for Executable {}
// SAFETY: as above.
unsafe impl Sync for Executable {}

/// What a compiled program holds on each device while it runs, from
/// XLA's buffer assignment (`PJRT_Executable_GetCompiledMemoryStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompiledMemory {
    /// Argument buffers.
    pub arguments: u64,
    /// Output buffers.
    pub outputs: u64,
    /// Bytes of outputs that reuse argument buffers (donated variables).
    pub aliased: u64,
    /// Scratch buffers.
    pub temp: u64,
    /// The generated code.
    pub code: u64,
    /// The plugin's peak, where it reports one (0 otherwise).
    pub peak: u64,
}

impl CompiledMemory {
    /// The bytes one device holds at most while the program runs: its
    /// buffers (aliased outputs counted once) and code, or the plugin's
    /// peak when that is larger.
    pub fn per_device(&self) -> u64 {
        let buffers = self.arguments.saturating_add(self.outputs).saturating_sub(self.aliased);
        buffers.saturating_add(self.temp).saturating_add(self.code).max(self.peak)
    }
}

impl Executable {
    /// The program's compiled memory stats, or `None` when the plugin
    /// does not report them.
    pub fn memory_stats(&self) -> Result<Option<CompiledMemory>, XlaError> {
        let offset = std::mem::offset_of!(ffi::Api, executable_getcompiledmemorystats);
        let Some(stats) = self.plugin.optional_entry(offset, |a| a.executable_getcompiledmemorystats) else {
            return Ok(None);
        };
        let api = self.plugin.api();
        let mut get = ffi::LoadedExecutableGetExecutableArgs::new();
        get.loaded_executable = self.raw;
        // SAFETY: a live loaded executable.
        let err = unsafe { call(api.loadedexecutable_getexecutable, &mut get) };
        pjrt(&self.plugin, err, "LoadedExecutable_GetExecutable", &self.name)?;
        let mut args = ffi::ExecutableGetCompiledMemoryStatsArgs::new();
        args.executable = get.executable;
        // SAFETY: the executable just returned; the entry was checked present.
        let err = unsafe { call(Some(stats), &mut args) };
        let mut destroy = ffi::ExecutableDestroyArgs::new();
        destroy.executable = get.executable;
        // SAFETY: GetExecutable hands the caller a reference to free.
        let destroy_err = unsafe { call(api.executable_destroy, &mut destroy) };
        pjrt(&self.plugin, destroy_err, "Executable_Destroy", &self.name)?;
        // A plugin that has the entry but cannot answer (unimplemented) reports nothing.
        if check(&self.plugin, err).is_err() {
            return Ok(None);
        }
        let bytes = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(Some(CompiledMemory {
            arguments: bytes(args.argument_size_in_bytes),
            outputs: bytes(args.output_size_in_bytes),
            aliased: bytes(args.alias_size_in_bytes),
            temp: bytes(args.temp_size_in_bytes),
            code: bytes(args.generated_code_size_in_bytes),
            peak: bytes(args.peak_memory_in_bytes),
        }))
    }

    /// Runs once on every device: `args[d]` are device d's arguments (on
    /// device d). Returns each device's outputs, after the run finished.
    /// An argument the program aliases to an output (a variable) is
    /// donated: its buffer must not be used again.
    pub fn execute(&self, args: &[Vec<&DeviceBuffer>]) -> Result<Vec<Vec<DeviceBuffer>>, XlaError> {
        if args.len() != self.devices {
            return Err(XlaError::UnsupportedGraph {
                message: format!("{}: {} argument lists for {} devices", self.name, args.len(), self.devices),
            });
        }
        let num_args = args.first().map_or(0, Vec::len);
        let raw_args: Vec<Vec<*mut ffi::Buffer>> = args.iter().map(|a| a.iter().map(|b| b.raw).collect()).collect();
        let arg_ptrs: Vec<*const *mut ffi::Buffer> = raw_args.iter().map(|a| a.as_ptr()).collect();
        let mut outputs: Vec<Vec<*mut ffi::Buffer>> =
            (0..self.devices).map(|_| vec![std::ptr::null_mut(); self.num_outputs]).collect();
        let out_ptrs: Vec<*mut *mut ffi::Buffer> = outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let mut events: Vec<*mut ffi::Event> = vec![std::ptr::null_mut(); self.devices];
        let mut options = ffi::ExecuteOptions::new();
        let mut exec = ffi::ExecuteArgs::new();
        exec.executable = self.raw;
        exec.options = &mut options;
        exec.argument_lists = arg_ptrs.as_ptr();
        exec.num_devices = self.devices;
        exec.num_args = num_args;
        exec.output_lists = out_ptrs.as_ptr();
        exec.device_complete_events = events.as_mut_ptr();
        // SAFETY: every array has `num_devices` rows of the declared lengths
        // and outlives the call; the buffers are live.
        let err = unsafe { call(self.plugin.api().loadedexecutable_execute, &mut exec) };
        pjrt(&self.plugin, err, "LoadedExecutable_Execute", &self.name)?;
        let mut result = Vec::with_capacity(self.devices);
        for row in outputs {
            result.push(row.into_iter().map(|raw| DeviceBuffer { plugin: self.plugin.clone(), raw }).collect());
        }
        for event in events.into_iter().filter(|e| !e.is_null()) {
            await_event(&self.plugin, event, &self.name)?;
        }
        Ok(result)
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut args = ffi::LoadedExecutableDestroyArgs::new();
        args.executable = self.raw;
        // SAFETY: destroyed once.
        let err = unsafe { call(self.plugin.api().loadedexecutable_destroy, &mut args) };
        let _ = check(&self.plugin, err);
    }
}

/// A buffer on a device.
pub struct DeviceBuffer {
    plugin: Arc<Plugin>,
    raw: *mut ffi::Buffer,
}

// SAFETY: PJRT buffers are thread-safe by the C API's contract.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Copies the buffer to the host; `what` names it in errors.
    pub fn to_host(&self, what: &str) -> Result<Tensor, XlaError> {
        let api = self.plugin.api();
        let mut t = ffi::BufferElementTypeArgs::new();
        t.buffer = self.raw;
        // SAFETY: a live buffer.
        let err = unsafe { call(api.buffer_elementtype, &mut t) };
        pjrt(&self.plugin, err, "Buffer_ElementType", what)?;
        let mut d = ffi::BufferDimensionsArgs::new();
        d.buffer = self.raw;
        // SAFETY: a live buffer.
        let err = unsafe { call(api.buffer_dimensions, &mut d) };
        pjrt(&self.plugin, err, "Buffer_Dimensions", what)?;
        let shape: Vec<usize> = if d.dims.is_null() {
            Vec::new()
        } else {
            // SAFETY: `num_dims` dims owned by the buffer.
            unsafe { std::slice::from_raw_parts(d.dims, d.num_dims) }.iter().map(|&x| x as usize).collect()
        };
        let dtype = dtype_of(t.kind)
            .ok_or_else(|| XlaError::DType { what: what.into(), dtype: format!("PJRT element type {}", t.kind) })?;
        let count: usize = shape.iter().product();
        let width = dtype.size_bytes().unwrap_or(4);
        let mut data = vec![0u8; count * width];
        let mut args = ffi::BufferToHostBufferArgs::new();
        args.src = self.raw;
        args.dst = data.as_mut_ptr().cast::<c_void>();
        args.dst_size = data.len();
        // SAFETY: `data` has `dst_size` bytes and outlives the wait below.
        let err = unsafe { call(api.buffer_tohostbuffer, &mut args) };
        pjrt(&self.plugin, err, "Buffer_ToHostBuffer", what)?;
        if !args.event.is_null() {
            await_event(&self.plugin, args.event, what)?;
        }
        let bad = |e: crate::exec::KernelError| XlaError::Host { node: what.into(), message: e.to_string() };
        let chunks = |w: usize| data.chunks_exact(w);
        match dtype {
            DType::F32 => Tensor::from_vec(
                &shape,
                chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::F64 => Tensor::from_vec(
                &shape,
                chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::I32 => Tensor::from_vec(
                &shape,
                chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::I64 => Tensor::from_vec(
                &shape,
                chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::BF16 => Tensor::from_vec(
                &shape,
                chunks(2).map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]]))).collect(),
            ),
            DType::F16 => Tensor::from_vec(
                &shape,
                chunks(2).map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]]))).collect(),
            ),
            DType::I8 => Tensor::from_vec(&shape, data.iter().map(|&b| b as i8).collect()),
            DType::U8 => Tensor::from_vec(&shape, data.clone()),
            DType::I16 => Tensor::from_vec(&shape, chunks(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect()),
            DType::U16 => Tensor::from_vec(&shape, chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()),
            DType::U32 => Tensor::from_vec(
                &shape,
                chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::U64 => Tensor::from_vec(
                &shape,
                chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
            ),
            DType::C64 => Tensor::from_vec(
                &shape,
                chunks(8)
                    .map(|c| {
                        let part = |k: usize| f32::from_le_bytes(c[k..k + 4].try_into().unwrap_or_default());
                        num_complex::Complex32::new(part(0), part(4))
                    })
                    .collect(),
            ),
            DType::C128 => Tensor::from_vec(
                &shape,
                chunks(16)
                    .map(|c| {
                        let part = |k: usize| f64::from_le_bytes(c[k..k + 8].try_into().unwrap_or_default());
                        num_complex::Complex64::new(part(0), part(8))
                    })
                    .collect(),
            ),
            _ => Tensor::from_vec(&shape, data.iter().map(|&b| b != 0).collect()),
        }
        .map_err(bad)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let mut args = ffi::BufferDestroyArgs::new();
        args.buffer = self.raw;
        // SAFETY: destroyed once.
        let err = unsafe { call(self.plugin.api().buffer_destroy, &mut args) };
        let _ = check(&self.plugin, err);
    }
}
