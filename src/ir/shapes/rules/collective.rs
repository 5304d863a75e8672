//! Collectives whose output type differs from their operand's: the
//! all-gather, which concatenates every member's operand along axis 0.

use super::{Args, OutType};
use crate::ir::AttrValue;

/// `AllGather(x, group_assignment)` / `CollectiveAllGather(x) {group_size
/// or group_assignment}`: `x` with dimension 0 times the group size. The
/// group size is the width of the `[groups, size]` assignment (operand 1's
/// shape, or the attribute), or the bound `group_size`.
pub(super) fn all_gather(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let size = match a.operands.get(1) {
        Some(groups) => match groups.shape {
            [_, size] => *size,
            other => return Err(format!("group_assignment must be [groups, size], got shape {other:?}")),
        },
        None => match (a.attrs.get_int("group_size"), a.attrs.get("group_assignment").and_then(AttrValue::as_tensor)) {
            (Some(size), _) => usize::try_from(size).map_err(|_| format!("group_size {size} is negative"))?,
            (None, Some(t)) if t.shape.len() == 2 => {
                usize::try_from(t.shape[1]).map_err(|_| "group_assignment has a negative width".to_string())?
            }
            _ => return Err("needs its replica groups (a group_assignment operand or attribute)".into()),
        },
    };
    let Some((&rows, rest)) = x.shape.split_first() else {
        return Err("cannot gather a scalar along axis 0".into());
    };
    let mut shape = vec![rows * size];
    shape.extend_from_slice(rest);
    Ok(vec![OutType::new(x.dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, x};
    use crate::ir::{AttrValue, DType};

    #[test]
    fn all_gather_multiplies_the_rows_by_the_group_size() {
        let groups = x(DType::I32, &[2, 4]);
        check("AllGather", &[], &[x(DType::F32, &[3, 5]), groups], Ok(&[(DType::F32, &[12, 5])]));
        let bound = [("group_size", AttrValue::Int(2))];
        check("CollectiveAllGather", &bound, &[x(DType::I32, &[3])], Ok(&[(DType::I32, &[6])]));
        check("AllGather", &[], &[x(DType::F32, &[]), x(DType::I32, &[1, 2])], Err("scalar"));
        check("CollectiveAllGather", &[], &[x(DType::F32, &[3])], Err("replica groups"));
    }
}
