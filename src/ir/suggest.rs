//! "Did you mean" suggestions: the known name closest to a misspelt one.
//!
//! One rule for every suggestion the project makes (node names, op types,
//! fetches, enum names): edit distance over characters, where swapping two
//! neighbours counts as one edit (optimal string alignment), accepted up to
//! a third of the name's length (at least 1, at most 2); ties go to the
//! candidate of the name's own length, then to the smaller name. It only runs for broken input, so a linear scan of the
//! candidates is fine.

/// The candidate closest to `name` within the accepted distance, if any.
/// Candidates equal to `name` are skipped.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).clamp(1, 2);
    let mut best: Option<(usize, usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == name || candidate.len().abs_diff(name.len()) > 3 {
            continue;
        }
        let d = edit_distance(name, candidate);
        let key = (d, usize::from(candidate.len() != name.len()), candidate);
        if d <= limit && best.is_none_or(|best| key < best) {
            best = Some(key);
        }
    }
    best.map(|b| b.2)
}

/// The edit distance between `a` and `b` over characters: insertions,
/// deletions, substitutions and swaps of neighbours, each costing one.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the dynamic programme: two back (for swaps), one back, current.
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut cur = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            let mut d = (prev[j] + usize::from(a[i] != b[j])).min(prev[j + 1] + 1).min(cur[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                d = d.min(before[j - 1] + 1);
            }
            cur[j + 1] = d;
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_within_a_third_of_the_length() {
        assert_eq!(closest("Tahn", ["Tanh", "Relu", "Tan"]), Some("Tanh"));
        assert_eq!(edit_distance("Tahn", "Tanh"), 1);
        assert_eq!(closest("MatMull", ["MatMul", "BatchMatMul"]), Some("MatMul"));
        assert_eq!(closest("lose:0", ["loss:0", "x:0"]), Some("loss:0"));
        assert_eq!(closest("Foo", ["Relu", "Tanh"]), None);
        assert_eq!(edit_distance("DT_FLOT", "DT_FLOAT"), 1);
    }
}
