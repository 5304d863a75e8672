//! Collectives between the device threads of one step, over shared memory.
//!
//! Members of a collective meet at a rendezvous keyed by (group, instance).
//! Each deposits its input tensors (cheap reference-counted clones, so every
//! member can read every other member's data in place).
//!
//! All-reduce is a reduce-scatter followed by an all-gather:
//! - reduce-scatter: every tensor is cut into work units of [`UNIT`]
//!   elements, and the members claim units one at a time until none is
//!   left, reducing each unit of every member's input in place, in rank
//!   order, a cache-sized block at a time. Claiming (rather than giving
//!   member `r` the `r`-th chunk) lets whichever members are running do
//!   the work: with more device threads than cores, a descheduled member
//!   no longer holds up its chunk, and a fused call of many tensors is
//!   reduced by every core at once;
//! - all-gather: the units are written in place into one output buffer per
//!   tensor (units are disjoint ranges), which every member then shares
//!   (copy-on-write), so gathering copies nothing.
//!
//! Output buffers are reused across steps: the mesh keeps a [`BufferPool`]
//! holding each collective's last outputs, and the next step at the same
//! (group, instance) takes the buffer back when nobody else holds it any
//! more, so a steady-state step allocates (and page-faults) nothing.
//!
//! Every element is reduced as `((x₀ + x₁) + x₂) + …` in rank order, so
//! the result is bit-identical on every member, on every run, and equal to
//! a sequential sum. Small reductions skip the scatter: the member
//! arriving last reduces everything itself, saving a second wait.
//!
//! Broadcast hands every member the source rank's tensors.
//!
//! All-gather hands every member the concatenation of all members' tensors
//! along axis 0, in rank order; the member arriving last builds it once and
//! every member shares it (the tensors are reference-counted).
//!
//! Every wait is bounded by the mesh timeout and checks the step's
//! cancellation flag.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ndarray::{ArcArray, ArrayD, IxDyn};

use super::kernels::Num;
use super::tensor::Tensor;

mod reduce;

use reduce::{reduce_range, slices};

/// When a call has fewer input elements than this (summed over members
/// and tensors), or only one work unit, the member arriving last reduces
/// everything itself: the reduction stays in cache and costs no second
/// wakeup of the others.
const SMALL_ELEMENTS: usize = 1 << 20;

/// Elements of one member's tensor in one work unit (256 KiB of f32): large
/// enough that claiming a unit costs little next to reducing it, small
/// enough that a fused call splits evenly over the running members.
const UNIT: usize = 1 << 16;

/// Outputs at least this large are written with streaming stores: they
/// would not stay in cache for their readers anyway.
const STREAM_BYTES: usize = 8 << 20;

/// How often a waiting member looks at the cancellation flag.
const POLL: Duration = Duration::from_millis(20);

/// How an all-reduce combines values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    /// The sum divided by the group size.
    Mean,
    /// The largest value (NaN if any member's is NaN).
    Max,
    /// The smallest value (NaN if any member's is NaN).
    Min,
    /// The product, in rank order.
    Prod,
}

/// What a collective does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce(ReduceOp),
    Broadcast {
        source: usize,
    },
    /// Concatenates the members' tensors along axis 0, in rank order.
    AllGather,
}

/// One member's call of a collective.
#[derive(Clone, Debug)]
pub(crate) struct Call<'a> {
    pub group: &'a str,
    pub instance: i64,
    pub group_size: usize,
    pub rank: usize,
    pub kind: Kind,
}

/// Why a collective did not complete.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CollectiveError {
    /// The members disagree, or the inputs are unusable.
    Mismatch(String),
    /// The timeout passed.
    Timeout,
    /// Another device failed and the step was cancelled.
    Cancelled,
}

/// Bounds a wait: a timeout and the step's cancellation flag.
pub(crate) struct Waiter<'a> {
    pub timeout: Duration,
    pub cancelled: &'a AtomicBool,
}

/// The rendezvous table of one step.
#[derive(Default)]
pub(crate) struct Collectives {
    table: Mutex<HashMap<(String, i64), Arc<Rendezvous>>>,
    pool: Option<Arc<BufferPool>>,
}

/// The outputs of each all-reduce, by (group, instance, tensor index),
/// kept so that the next step can write into the same buffers.
#[derive(Default)]
pub(crate) struct BufferPool {
    outputs: Mutex<HashMap<(String, i64, usize), Tensor>>,
}

impl BufferPool {
    /// The buffer of output `index` of (group, instance) when its last
    /// value is no longer used elsewhere and has `dtype` and `len`.
    fn take(&self, group: &str, instance: i64, index: usize, like: &Tensor) -> Option<OutBuf> {
        let old = lock(&self.outputs).remove(&(group.to_string(), instance, index))?;
        if old.dtype() != like.dtype() || old.len() != like.len() {
            return None;
        }
        fn reclaim<T: Num>(a: ArcArray<T, IxDyn>) -> Option<Buffer<T>> {
            let (v, offset) = a.try_into_owned_nocopy().ok()?.into_raw_vec_and_offset();
            (offset.unwrap_or(0) == 0).then(|| Buffer::from_vec(v))
        }
        match old {
            Tensor::F32(a) => reclaim(a).map(OutBuf::F32),
            Tensor::F64(a) => reclaim(a).map(OutBuf::F64),
            Tensor::I32(a) => reclaim(a).map(OutBuf::I32),
            Tensor::I64(a) => reclaim(a).map(OutBuf::I64),
            _ => None,
        }
    }

    /// Keeps the outputs of (group, instance) for the next step.
    fn keep(&self, group: &str, instance: i64, outputs: &[Tensor]) {
        let mut map = lock(&self.outputs);
        for (i, t) in outputs.iter().enumerate() {
            map.insert((group.to_string(), instance, i), t.clone());
        }
    }
}

struct Rendezvous {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    group_size: usize,
    kind: Option<Kind>,
    inputs: Vec<Option<Vec<Tensor>>>,
    arrived: usize,
    /// All inputs, once every member has arrived.
    all: Option<Arc<Vec<Vec<Tensor>>>>,
    /// The output buffers (one per tensor) members fill, for the scatter path.
    out: Option<Arc<Vec<OutBuf>>>,
    /// The work units of the scatter path: (tensor index, element range).
    units: Vec<(usize, Range<usize>)>,
    /// The first unit nobody has claimed yet.
    next_unit: usize,
    /// Units reduced. A member holds clones of `all` and `out` only while
    /// it reduces a claimed unit, so when every unit is done nobody does.
    units_done: usize,
    result: Option<Result<Arc<Vec<Tensor>>, String>>,
}

/// A buffer that the members of an all-reduce fill in disjoint ranges.
///
/// The vector is allocated once and not touched as a `Vec` until every
/// writer is done; writers reach it only through [`Buffer::range_mut`].
struct Buffer<T> {
    data: std::cell::UnsafeCell<Vec<T>>,
    ptr: *mut T,
    len: usize,
}

// SAFETY: members write disjoint ranges (see `range_mut`), and the vector is
// taken back only after every writer has finished, which the rendezvous
// mutex orders before the take.
unsafe impl<T: Send> Send for Buffer<T> {}
unsafe impl<T: Send> Sync for Buffer<T> {}

impl<T: Num> Buffer<T> {
    fn zeroed(len: usize) -> Buffer<T> {
        Buffer::from_vec(vec![T::zero(); len])
    }

    /// A buffer over `v`, whose contents are all overwritten before use.
    fn from_vec(mut v: Vec<T>) -> Buffer<T> {
        let ptr = v.as_mut_ptr();
        let len = v.len();
        Buffer { data: std::cell::UnsafeCell::new(v), ptr, len }
    }

    /// The elements in `range`, for writing.
    ///
    /// # Safety
    /// No two live slices from one buffer may overlap, and none may be live
    /// when the buffer is taken apart with [`Buffer::into_vec`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn range_mut(&self, range: Range<usize>) -> &mut [T] {
        assert!(range.start <= range.end && range.end <= self.len, "range within the buffer");
        // SAFETY: in bounds (checked above); disjointness is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    fn into_vec(self) -> Vec<T> {
        self.data.into_inner()
    }
}

/// The output buffer of one tensor of an all-reduce.
enum OutBuf {
    F32(Buffer<f32>),
    F64(Buffer<f64>),
    I32(Buffer<i32>),
    I64(Buffer<i64>),
}

impl OutBuf {
    fn len(&self) -> usize {
        match self {
            OutBuf::F32(b) => b.len,
            OutBuf::F64(b) => b.len,
            OutBuf::I32(b) => b.len,
            OutBuf::I64(b) => b.len,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Collectives {
    /// A table whose all-reduces reuse the output buffers kept in `pool`.
    pub(crate) fn with_pool(pool: Arc<BufferPool>) -> Collectives {
        Collectives { table: Mutex::default(), pool: Some(pool) }
    }

    /// One output buffer per tensor, shaped like rank 0's inputs, reused
    /// from the pool where possible.
    fn allocate(&self, call: &Call<'_>, all: &[Vec<Tensor>]) -> Vec<OutBuf> {
        let Some(first) = all.first() else { return Vec::new() };
        first
            .iter()
            .enumerate()
            .map(|(i, t)| {
                self.pool
                    .as_ref()
                    .and_then(|p| p.take(call.group, call.instance, i, t))
                    .unwrap_or_else(|| fresh_buffer(t))
            })
            .collect()
    }

    /// Hands finished outputs to the pool.
    fn keep(&self, call: &Call<'_>, result: &Result<Vec<Tensor>, String>) {
        if let (Some(pool), Ok(outputs)) = (&self.pool, result) {
            pool.keep(call.group, call.instance, outputs);
        }
    }

    /// Claims and reduces work units of `rv` until none is left; the member
    /// that finishes the last unit turns the buffers into the result.
    fn reduce_units(&self, rv: &Rendezvous, call: &Call<'_>, op: ReduceOp) {
        loop {
            let (all, out, (index, range)) = {
                let mut st = lock(&rv.state);
                let (Some(all), Some(out)) = (st.all.clone(), st.out.clone()) else { return };
                let Some(unit) = st.units.get(st.next_unit).cloned() else { return };
                st.next_unit += 1;
                (all, out, unit)
            };
            // SAFETY: units are disjoint ranges and each is claimed once, so
            // no two threads write the same elements; the buffers are taken
            // apart only when every unit is done, after this thread has
            // dropped its clones below.
            unsafe { reduce_into(&all, index, &out[index], range, op) };
            drop((all, out));
            let mut st = lock(&rv.state);
            st.units_done += 1;
            if st.units_done == st.units.len() {
                let out = st.out.take().and_then(|o| Arc::try_unwrap(o).ok());
                let result = match (st.all.take(), out) {
                    (Some(all), Some(out)) => finish(&all, out),
                    _ => Err("internal: all-reduce buffers still shared".to_string()),
                };
                self.keep(call, &result);
                st.result = Some(result.map(Arc::new));
                rv.changed.notify_all();
                return;
            }
        }
    }

    /// Runs one member's part of a collective and returns its outputs.
    pub(crate) fn run(
        &self,
        call: &Call<'_>,
        inputs: Vec<Tensor>,
        waiter: &Waiter<'_>,
    ) -> Result<Vec<Tensor>, CollectiveError> {
        if call.group_size == 0 || call.rank >= call.group_size {
            return Err(CollectiveError::Mismatch(format!(
                "rank {} is not in a group of size {}",
                call.rank, call.group_size
            )));
        }
        if let Kind::Broadcast { source } = call.kind {
            if source >= call.group_size {
                return Err(CollectiveError::Mismatch(format!(
                    "source rank {source} is not in a group of size {}",
                    call.group_size
                )));
            }
        }
        let rv = {
            let mut table = lock(&self.table);
            table
                .entry((call.group.to_string(), call.instance))
                .or_insert_with(|| {
                    Arc::new(Rendezvous { state: Mutex::new(State::default()), changed: Condvar::new() })
                })
                .clone()
        };
        let deadline = Instant::now() + waiter.timeout;
        let inputs: Vec<Tensor> = inputs.into_iter().map(standard_layout).collect();
        let scatter = {
            let mut st = lock(&rv.state);
            arrive(&mut st, call, inputs)?;
            if st.arrived == call.group_size && st.result.is_none() {
                // The last member to arrive validates and, for small inputs, reduces.
                let all: Vec<Vec<Tensor>> = st.inputs.iter_mut().map(|i| i.take().unwrap_or_default()).collect();
                match call.kind {
                    Kind::Broadcast { .. } => {}
                    Kind::AllGather => st.result = Some(gather(&all).map(Arc::new)),
                    Kind::AllReduce(op) => match validate(&all) {
                        Err(message) => st.result = Some(Err(message)),
                        Ok(total) => {
                            let units = work_units(&all[0]);
                            if total * call.group_size < SMALL_ELEMENTS || units.len() <= 1 {
                                drop(st);
                                let out = self.allocate(call, &all);
                                for (i, buf) in out.iter().enumerate() {
                                    // SAFETY: the only writer, of the whole buffer.
                                    unsafe { reduce_into(&all, i, buf, 0..buf.len(), op) };
                                }
                                let result = finish(&all, out);
                                self.keep(call, &result);
                                st = lock(&rv.state);
                                st.result = Some(result.map(Arc::new));
                            } else {
                                st.units = units;
                                st.out = Some(Arc::new(self.allocate(call, &all)));
                                st.all = Some(Arc::new(all));
                            }
                        }
                    },
                }
                rv.changed.notify_all();
            }
            if matches!(call.kind, Kind::AllReduce(_)) && st.result.is_none() {
                let st = wait(&rv, st, deadline, waiter, |s| s.all.is_some() || s.result.is_some())?;
                st.all.is_some()
            } else {
                false
            }
        };
        if let (true, Kind::AllReduce(op)) = (scatter, call.kind) {
            self.reduce_units(&rv, call, op);
        }
        let st = lock(&rv.state);
        let st = wait(&rv, st, deadline, waiter, |s| s.result.is_some())?;
        match &st.result {
            Some(Ok(out)) => Ok(out.as_ref().clone()),
            Some(Err(message)) => Err(CollectiveError::Mismatch(message.clone())),
            None => Err(CollectiveError::Timeout),
        }
    }
}

fn standard_layout(t: Tensor) -> Tensor {
    fn std<T: Clone>(a: ArcArray<T, IxDyn>) -> ArcArray<T, IxDyn> {
        if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned().into_shared()
        }
    }
    match t {
        Tensor::F32(a) => Tensor::F32(std(a)),
        Tensor::F64(a) => Tensor::F64(std(a)),
        Tensor::I32(a) => Tensor::I32(std(a)),
        Tensor::I64(a) => Tensor::I64(std(a)),
        other => other,
    }
}

/// Records a member's arrival, checking it agrees with the others.
fn arrive(st: &mut State, call: &Call<'_>, inputs: Vec<Tensor>) -> Result<(), CollectiveError> {
    match st.kind {
        None => {
            st.kind = Some(call.kind);
            st.group_size = call.group_size;
            st.inputs = vec![None; call.group_size];
        }
        Some(kind) if kind != call.kind || st.group_size != call.group_size => {
            return Err(CollectiveError::Mismatch(format!(
                "members disagree: {kind:?} over {} members vs {:?} over {}",
                st.group_size, call.kind, call.group_size
            )));
        }
        Some(_) => {}
    }
    if st.inputs[call.rank].is_some() || st.arrived == st.group_size {
        return Err(CollectiveError::Mismatch(format!("rank {} joined twice", call.rank)));
    }
    if let Kind::Broadcast { source } = call.kind {
        if call.rank == source {
            st.result = Some(Ok(Arc::new(inputs.clone())));
        }
    }
    st.inputs[call.rank] = Some(inputs);
    st.arrived += 1;
    Ok(())
}

fn wait<'a>(
    rv: &'a Rendezvous,
    mut st: MutexGuard<'a, State>,
    deadline: Instant,
    waiter: &Waiter<'_>,
    done: impl Fn(&State) -> bool,
) -> Result<MutexGuard<'a, State>, CollectiveError> {
    loop {
        if done(&st) {
            return Ok(st);
        }
        if waiter.cancelled.load(Ordering::Relaxed) {
            return Err(CollectiveError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(CollectiveError::Timeout);
        }
        st = rv.changed.wait_timeout(st, POLL.min(deadline - now)).unwrap_or_else(|p| p.into_inner()).0;
    }
}

/// Each tensor of every member concatenated along axis 0 in rank order,
/// after checking that the members' tensors agree in dtype and in every
/// dimension but the first.
fn gather(all: &[Vec<Tensor>]) -> Result<Vec<Tensor>, String> {
    let first = all.first().ok_or("no members")?;
    if let Some((rank, inputs)) = all.iter().enumerate().find(|(_, inputs)| inputs.len() != first.len()) {
        return Err(format!("rank {rank} gave {} tensors, rank 0 gave {}", inputs.len(), first.len()));
    }
    let mut out = Vec::with_capacity(first.len());
    for (i, f) in first.iter().enumerate() {
        let rows_of = |t: &Tensor| (t.dtype(), t.shape().get(1..).map(<[usize]>::to_vec));
        let mut parts: Vec<Tensor> = all.iter().map(|inputs| inputs[i].clone()).collect();
        if let Some((rank, t)) =
            parts.iter().enumerate().find(|(_, t)| rows_of(t) != rows_of(f) || t.shape().is_empty())
        {
            let (d, s, fd, fs) = (t.dtype(), t.shape(), f.dtype(), f.shape());
            return Err(format!(
                "tensor {i}: rank {rank} has {d} {s:?}, which does not concatenate with rank 0's {fd} {fs:?}"
            ));
        }
        parts.push(Tensor::scalar(0i32));
        let joined = super::kernels::run_kernel("ConcatV2", &crate::ir::AttrMap::new(), &parts);
        out.push(joined.map_err(|e| format!("tensor {i}: {e}"))?.pop().ok_or("the concatenation gave no tensor")?);
    }
    Ok(out)
}

/// Checks that every member gave tensors of the same kinds and shapes;
/// returns the element count of one member's tensors.
fn validate(all: &[Vec<Tensor>]) -> Result<usize, String> {
    let first = all.first().ok_or("no members")?;
    for (rank, inputs) in all.iter().enumerate() {
        if inputs.len() != first.len() {
            return Err(format!("rank {rank} gave {} tensors, rank 0 gave {}", inputs.len(), first.len()));
        }
        for (i, (t, f)) in inputs.iter().zip(first).enumerate() {
            if t.dtype() != f.dtype() || t.shape() != f.shape() {
                return Err(format!(
                    "tensor {i}: rank {rank} has {} {:?}, rank 0 has {} {:?}",
                    t.dtype(),
                    t.shape(),
                    f.dtype(),
                    f.shape()
                ));
            }
            if !matches!(t, Tensor::F32(_) | Tensor::F64(_) | Tensor::I32(_) | Tensor::I64(_)) {
                return Err(format!("tensor {i}: cannot reduce dtype {}", t.dtype()));
            }
        }
    }
    Ok(first.iter().map(Tensor::len).sum())
}

/// The work units of a call whose members each give tensors like `tensors`:
/// every tensor cut into runs of at most [`UNIT`] elements.
fn work_units(tensors: &[Tensor]) -> Vec<(usize, Range<usize>)> {
    tensors
        .iter()
        .enumerate()
        .flat_map(|(i, t)| (0..t.len()).step_by(UNIT).map(move |start| (i, start..(start + UNIT).min(t.len()))))
        .collect()
}

/// A new output buffer for a tensor like `t`.
fn fresh_buffer(t: &Tensor) -> OutBuf {
    match t {
        Tensor::F64(_) => OutBuf::F64(Buffer::zeroed(t.len())),
        Tensor::I32(_) => OutBuf::I32(Buffer::zeroed(t.len())),
        Tensor::I64(_) => OutBuf::I64(Buffer::zeroed(t.len())),
        _ => OutBuf::F32(Buffer::zeroed(t.len())),
    }
}

/// Reduces elements `range` of tensor `index` into `buf`.
///
/// # Safety
/// No other thread may write the same elements of `buf` at the same time.
unsafe fn reduce_into(all: &[Vec<Tensor>], index: usize, buf: &OutBuf, range: Range<usize>, op: ReduceOp) {
    macro_rules! go {
        ($ty:ty, $b:expr) => {
            if let Some(inputs) = slices::<$ty>(all, index) {
                // SAFETY: the caller guarantees this chunk is written by this thread only.
                let out = unsafe { $b.range_mut(range.clone()) };
                let streaming = $b.len * std::mem::size_of::<$ty>() >= STREAM_BYTES;
                reduce_range(&inputs, range, op, out, streaming);
            }
        };
    }
    match buf {
        OutBuf::F32(b) => go!(f32, b),
        OutBuf::F64(b) => go!(f64, b),
        OutBuf::I32(b) => go!(i32, b),
        OutBuf::I64(b) => go!(i64, b),
    }
}

/// Turns the filled buffers into tensors shaped like the inputs.
fn finish(all: &[Vec<Tensor>], out: Vec<OutBuf>) -> Result<Vec<Tensor>, String> {
    let first = all.first().ok_or("no members")?;
    first
        .iter()
        .zip(out)
        .map(|(t, buf)| {
            let shape = IxDyn(t.shape());
            let tensor = match buf {
                OutBuf::F32(b) => ArrayD::from_shape_vec(shape, b.into_vec()).map(Tensor::from_array),
                OutBuf::F64(b) => ArrayD::from_shape_vec(shape, b.into_vec()).map(Tensor::from_array),
                OutBuf::I32(b) => ArrayD::from_shape_vec(shape, b.into_vec()).map(Tensor::from_array),
                OutBuf::I64(b) => ArrayD::from_shape_vec(shape, b.into_vec()).map(Tensor::from_array),
            };
            tensor.map_err(|e| e.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_group(kind: Kind, inputs: Vec<Vec<Tensor>>) -> Vec<Result<Vec<Tensor>, CollectiveError>> {
        let collectives = Collectives::default();
        let cancelled = AtomicBool::new(false);
        let n = inputs.len();
        std::thread::scope(|s| {
            let handles: Vec<_> = inputs
                .into_iter()
                .enumerate()
                .map(|(rank, x)| {
                    let (c, cancelled) = (&collectives, &cancelled);
                    s.spawn(move || {
                        let call = Call { group: "g", instance: 1, group_size: n, rank, kind };
                        c.run(&call, x, &Waiter { timeout: Duration::from_secs(5), cancelled })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("member thread")).collect()
        })
    }

    #[test]
    fn all_reduce_sum_and_mean_small() {
        let inputs: Vec<Vec<Tensor>> = (0..4).map(|r| vec![Tensor::vector(vec![r as f32, 1.0])]).collect();
        for r in run_group(Kind::AllReduce(ReduceOp::Sum), inputs.clone()) {
            assert_eq!(r.unwrap(), vec![Tensor::vector(vec![6.0f32, 4.0])]);
        }
        for r in run_group(Kind::AllReduce(ReduceOp::Mean), inputs) {
            assert_eq!(r.unwrap(), vec![Tensor::vector(vec![1.5f32, 1.0])]);
        }
        // Max, min and product; a NaN member makes the max and the min NaN.
        let inputs: Vec<Vec<Tensor>> =
            [[2.0f32, -1.0], [f32::NAN, 3.0], [0.5, -2.0]].iter().map(|v| vec![Tensor::vector(v.to_vec())]).collect();
        for (op, want) in [(ReduceOp::Max, 3.0f32), (ReduceOp::Min, -2.0), (ReduceOp::Prod, 6.0)] {
            for r in run_group(Kind::AllReduce(op), inputs.clone()) {
                let got = r.unwrap()[0].to_vec::<f32>().unwrap();
                assert!(got[0].is_nan() && got[1] == want, "{op:?}: {got:?}");
            }
        }
    }

    #[test]
    fn all_reduce_large_matches_sequential_sum_bitwise() {
        let n = 8;
        let len = SMALL_ELEMENTS / n * 2 + 13;
        let inputs: Vec<Vec<Tensor>> = (0..n)
            .map(|r| {
                let v: Vec<f32> = (0..len).map(|i| ((i * 7 + r * 13) % 101) as f32 * 0.013 + r as f32 * 1e-3).collect();
                vec![Tensor::vector(v), Tensor::vector(vec![r as i64; 3])]
            })
            .collect();
        let expected: Vec<f32> = (0..len)
            .map(|i| {
                let mut acc = inputs[0][0].view::<f32>().unwrap()[i];
                for member in &inputs[1..] {
                    acc += member[0].view::<f32>().unwrap()[i];
                }
                acc
            })
            .collect();
        let results = run_group(Kind::AllReduce(ReduceOp::Sum), inputs);
        for r in results {
            let out = r.unwrap();
            assert!(out[0].bit_eq(&Tensor::vector(expected.clone())));
            assert_eq!(out[1], Tensor::vector(vec![28i64; 3]));
        }
    }

    #[test]
    fn broadcast_takes_the_source() {
        let inputs: Vec<Vec<Tensor>> = (0..3).map(|r| vec![Tensor::scalar(r)]).collect();
        for r in run_group(Kind::Broadcast { source: 2 }, inputs) {
            assert_eq!(r.unwrap(), vec![Tensor::scalar(2i32)]);
        }
    }

    #[test]
    fn all_gather_concatenates_in_rank_order() {
        let inputs: Vec<Vec<Tensor>> = (0..3i32)
            .map(|r| vec![Tensor::from_vec(&[2, 1], vec![r as f32, 10.0 + r as f32]).unwrap(), Tensor::vector(vec![r])])
            .collect();
        let rows = Tensor::from_vec(&[6, 1], vec![0.0f32, 10.0, 1.0, 11.0, 2.0, 12.0]).unwrap();
        for r in run_group(Kind::AllGather, inputs) {
            assert_eq!(r.unwrap(), vec![rows.clone(), Tensor::vector(vec![0i32, 1, 2])]);
        }
    }

    #[test]
    fn all_gather_refuses_rows_of_different_widths() {
        let inputs =
            vec![vec![Tensor::from_vec(&[1, 2], vec![1.0f32, 2.0]).unwrap()], vec![Tensor::vector(vec![1.0f32])]];
        for r in run_group(Kind::AllGather, inputs) {
            assert!(matches!(r, Err(CollectiveError::Mismatch(m)) if m.contains("does not concatenate")));
        }
    }

    #[test]
    fn mismatched_shapes_fail_every_member() {
        let inputs = vec![vec![Tensor::vector(vec![1.0f32])], vec![Tensor::vector(vec![1.0f32, 2.0])]];
        for r in run_group(Kind::AllReduce(ReduceOp::Sum), inputs) {
            assert!(matches!(r, Err(CollectiveError::Mismatch(_))));
        }
    }

    #[test]
    fn missing_member_times_out() {
        let collectives = Collectives::default();
        let cancelled = AtomicBool::new(false);
        let call = Call { group: "g", instance: 0, group_size: 2, rank: 0, kind: Kind::AllReduce(ReduceOp::Sum) };
        let waiter = Waiter { timeout: Duration::from_millis(50), cancelled: &cancelled };
        let start = Instant::now();
        assert_eq!(collectives.run(&call, vec![Tensor::scalar(1.0f32)], &waiter), Err(CollectiveError::Timeout));
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
