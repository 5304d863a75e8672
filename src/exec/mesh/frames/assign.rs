//! The frame of every step of a program with TF1 control flow, found as
//! TensorFlow's executor finds it (see the parent module): in a
//! topological order that ignores the back edges, an `Enter` starts the
//! child frame its `frame_name` names, an `Exit` returns to the parent, and
//! every other data edge stays in its frame. A control input may come from
//! an enclosing frame (it is waited for once, before the inner frame
//! starts); any other crossing is a `control_flow` error. Cost: linear in
//! the program's size times the nesting depth.

use super::*;

/// The frame of every step (`NONE` where no source reaches it: a cycle the
/// caller reports) and the frames' parents and names.
pub(super) struct Frames {
    pub(super) frame: Vec<u32>,
    pub(super) parent: Vec<u32>,
    pub(super) name: Vec<Arc<str>>,
}

pub(super) fn assign_frames(
    graph: &str,
    steps: &[Step],
    kinds: &[Kind],
    succs: &[Vec<usize>],
) -> Result<Frames, ExecError> {
    let n = steps.len();
    let mut frames = Frames { frame: vec![NONE; n], parent: vec![NONE], name: vec![Arc::from("")] };
    let mut index: HashMap<(u32, Arc<str>), u32> = HashMap::new();
    let error = |i: usize, reason: String| ExecError::ControlFlow {
        graph: graph.to_string(),
        node: steps[i].name.to_string(),
        reason,
        span: steps[i].span,
    };
    // The frame `b` is in, given that its input `a` is in frame `fa`.
    let mut expected = |frames: &mut Frames, a: usize, b: usize| -> Result<u32, ExecError> {
        let mut fa = frames.frame[a];
        // An `Exit` feeding an `Enter` (a loop's result entering the next loop, as TensorFlow's
        // gradient loops take the forward loop's count): the `Enter` opens its frame in the
        // frame the `Exit` leaves to.
        if kinds[a] == Kind::Exit && kinds[b] == Kind::Enter {
            if fa == ROOT {
                return Err(error(a, "is an `Exit` outside every loop".into()));
            }
            fa = frames.parent[fa as usize];
        }
        if kinds[b] == Kind::Enter {
            let name: Arc<str> = Arc::from(steps[b].attrs.get_str("frame_name").unwrap_or(""));
            let next = frames.parent.len() as u32;
            let id = *index.entry((fa, name.clone())).or_insert(next);
            if id == next {
                frames.parent.push(fa);
                frames.name.push(name);
            }
            Ok(id)
        } else if kinds[a] == Kind::Exit {
            if fa == ROOT {
                return Err(error(a, "is an `Exit` outside every loop".into()));
            }
            Ok(frames.parent[fa as usize])
        } else {
            Ok(fa)
        }
    };
    // A control predecessor's frame, from the side of its consumer: an `Exit` signals in the
    // frame it leaves to.
    let control_frame = |frames: &Frames, a: usize| -> u32 {
        let fa = frames.frame[a];
        if kinds[a] == Kind::Exit && fa != ROOT && fa != NONE {
            frames.parent[fa as usize]
        } else {
            fa
        }
    };
    let depth = |frames: &Frames, mut f: u32| -> usize {
        let mut d = 0;
        while f != ROOT {
            f = frames.parent[f as usize];
            d += 1;
        }
        d
    };
    // Whether `outer` is `inner` or encloses it.
    let encloses = |frames: &Frames, outer: u32, mut inner: u32| -> bool {
        loop {
            if inner == outer {
                return true;
            }
            if inner == ROOT {
                return false;
            }
            inner = frames.parent[inner as usize];
        }
    };
    // A control input that is not also a data input: one from an enclosing frame is legal (it
    // is satisfied once, before the inner frame starts), so it does not decide the frame.
    let control_only = |a: usize, b: usize| !steps[b].inputs.iter().any(|&(src, _)| src == a);
    // Frames in a topological order that ignores the back edges (out of `NextIteration`): a
    // node's frame is its data inputs' frame, or for a node with control inputs only the
    // innermost of theirs. A node left unassigned is on a cycle the caller reports.
    let mut waiting: Vec<usize> = vec![0; n];
    for (a, out) in succs.iter().enumerate() {
        if kinds[a] != Kind::NextIteration {
            for &b in out {
                waiting[b] += 1;
            }
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    while let Some(b) = queue.pop_front() {
        let data = steps[b].inputs.iter().map(|&(a, _)| a).find(|&a| frames.frame[a] != NONE);
        frames.frame[b] = match data {
            Some(a) => expected(&mut frames, a, b)?,
            None if kinds[b] == Kind::Enter => match steps[b].preds.iter().find(|&&a| frames.frame[a] != NONE) {
                Some(&a) => expected(&mut frames, a, b)?,
                None => ROOT,
            },
            None => steps[b]
                .preds
                .iter()
                .map(|&a| control_frame(&frames, a))
                .filter(|&f| f != NONE)
                .max_by_key(|&f| depth(&frames, f))
                .unwrap_or(ROOT),
        };
        if kinds[b] != Kind::NextIteration {
            for &c in &succs[b] {
                waiting[c] -= 1;
                if waiting[c] == 0 {
                    queue.push_back(c);
                }
            }
        }
    }
    let spell = |frames: &Frames, f: u32| {
        if f == ROOT {
            "the top level".to_string()
        } else {
            format!("loop frame `{}`", frames.name[f as usize])
        }
    };
    for b in 0..n {
        for &a in &steps[b].preds {
            if frames.frame[a] == NONE || frames.frame[b] == NONE {
                continue;
            }
            if control_only(a, b) {
                // The frame `b` runs in (an `Enter` runs in the frame it enters from).
                let fb =
                    if kinds[b] == Kind::Enter { frames.parent[frames.frame[b] as usize] } else { frames.frame[b] };
                let fa = control_frame(&frames, a);
                if !encloses(&frames, fa, fb) {
                    return Err(error(
                        b,
                        format!(
                            "is in {} but has a control input `%{}` from {}, which neither is nor encloses it",
                            spell(&frames, fb),
                            steps[a].name,
                            spell(&frames, fa)
                        ),
                    ));
                }
                continue;
            }
            let want = expected(&mut frames, a, b)?;
            if want != frames.frame[b] {
                return Err(error(
                    b,
                    format!(
                        "is in {} but its input `%{}` puts it in {}",
                        spell(&frames, frames.frame[b]),
                        steps[a].name,
                        spell(&frames, want)
                    ),
                ));
            }
        }
    }
    Ok(frames)
}
