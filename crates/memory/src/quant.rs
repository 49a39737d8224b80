//! Compact vectors for brute-force search over many rows: int8 values
//! with one scale per row (cosine within ~1 % of float), and one sign bit
//! per dimension, whose Hamming distance shortlists the rows worth an int8
//! cosine when there are tens of thousands. Shared by the memory index and
//! the document library.

/// Symmetric int8 quantisation: v ≈ scale · q.
pub fn quantise(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (0.0, vec![0; v.len()]);
    }
    let inv = 127.0 / max;
    (max / 127.0, v.iter().map(|x| (x * inv).round().clamp(-127.0, 127.0) as i8).collect())
}

/// Written so the compiler vectorises it (i8 × i8 → i32 lanes).
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for j in 0..16 {
            acc[j] += x[j] as i32 * y[j] as i32;
        }
    }
    let tail: i32 = ca.remainder().iter().zip(cb.remainder()).map(|(&x, &y)| x as i32 * y as i32).sum();
    acc.iter().sum::<i32>() + tail
}

/// One bit per dimension (set when positive), `dim.div_ceil(64)` words.
pub fn sign_bits(v: &[f32]) -> Vec<u64> {
    let mut bits = vec![0u64; v.len().div_ceil(64)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}

/// The `keep` rows of `rows` nearest to the query by sign bits (Hamming
/// distance), in row order; `signs` holds every row's bits, as many words
/// per row as `query_bits` has. One pass computes every distance (at most
/// the dimension, so a histogram finds the cut-off), a second keeps the
/// rows under it: no sort, no distance computed twice.
pub fn nearest_by_signs(signs: &[u64], query_bits: &[u64], rows: &[usize], keep: usize) -> Vec<usize> {
    let words = query_bits.len();
    let distances: Vec<u16> = rows
        .iter()
        .map(|&i| {
            let bits = &signs[i * words..(i + 1) * words];
            bits.iter().zip(query_bits).map(|(a, b)| (a ^ b).count_ones() as u16).sum()
        })
        .collect();
    let mut histogram = vec![0usize; words * 64 + 1];
    for &d in &distances {
        histogram[d as usize] += 1;
    }
    // The smallest distance `cut` with at least `keep` rows at or under it.
    let mut below = 0;
    let mut cut = histogram.len();
    for (d, &count) in histogram.iter().enumerate() {
        if below + count >= keep {
            cut = d;
            break;
        }
        below += count;
    }
    // All rows under the cut, and the first rows at it up to `keep`.
    let mut at_cut = keep.saturating_sub(below);
    let mut kept = Vec::with_capacity(keep);
    for (&i, &d) in rows.iter().zip(&distances) {
        if (d as usize) < cut {
            kept.push(i);
        } else if d as usize == cut && at_cut > 0 {
            at_cut -= 1;
            kept.push(i);
        }
    }
    kept
}
