//! Type rule of `XlaCallModule`: the results its attributes declare, one per
//! entry of `Tout` with the fully known shape of the same entry of `Sout`
//! (as TensorFlow's shape function gives them). A module whose shapes are
//! polymorphic declares unknown dimensions in `Sout`; the rule refuses them,
//! since these rules serve programs whose every dimension is known.

use super::{Args, OutType};
use crate::ir::AttrValue;

/// `XlaCallModule(args...) {Tout, Sout}`.
pub(super) fn xla_call_module(a: &Args) -> Result<Vec<OutType>, String> {
    let list = |key: &str| {
        a.attrs.get(key).and_then(AttrValue::as_list).ok_or_else(|| format!("missing list attribute `{key}`"))
    };
    let (tout, sout) = (list("Tout")?, list("Sout")?);
    if tout.len() != sout.len() {
        return Err(format!("`Tout` has {} types but `Sout` has {} shapes", tout.len(), sout.len()));
    }
    tout.iter()
        .zip(sout)
        .enumerate()
        .map(|(i, (t, s))| {
            let dtype = t.as_type().ok_or_else(|| format!("`Tout` entry {i} is not a dtype"))?;
            let shape = s.as_shape().ok_or_else(|| format!("`Sout` entry {i} is not a shape"))?;
            let dims = shape.dims.as_ref().ok_or_else(|| format!("`Sout` entry {i} has unknown rank"))?;
            let dims = dims
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("`Sout` entry {i} has an unknown dimension")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(OutType::new(dtype, dims))
        })
        .collect()
}
