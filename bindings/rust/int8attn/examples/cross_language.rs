//! The cross-language check's Rust participant (see tests/cross_language/README.md).
//!
//!     cargo run --example cross_language -- OUT_DIR
//!
//! Writes OUT_DIR/rust_exact.txt and OUT_DIR/rust_balanced.txt: O as one float32 bit pattern
//! (8 lowercase hex digits) per line.
use int8attn::{Context, ForwardParams, Mode, TensorView, TensorViewMut};
use std::io::Write;

const B: i64 = 1;
const H: i64 = 2;
/// More than 512 keys: on at most 512 (of 40 channels) every mode runs EXACT
/// (tests/cross_language/README.md).
const N: i64 = 550;
const D: i64 = 40;

/// x_c[i] = (((i·7919 + c·7207) mod 1999) − 999) / 400 (+ ((i mod 40) mod 5)·0.25 for K, c = 2),
/// computed in float64 and rounded to float32.
fn input(c: i64) -> Vec<f32> {
    (0..B * H * N * D)
        .map(|i| {
            let k = (i * 7919 + c * 7207) % 1999;
            let mut x = (k - 999) as f64 / 400.0;
            if c == 2 {
                x += ((i % D) % 5) as f64 * 0.25;
            }
            x as f32
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::args().nth(1).ok_or("usage: cross_language OUT_DIR")?;
    let (q, k, v) = (input(1), input(2), input(3));
    let shape = [B, H, N, D];
    let ctx = Context::new()?;
    for (name, mode) in [("exact", Mode::Exact), ("balanced", Mode::Balanced)] {
        let mut o = vec![0f32; q.len()];
        ctx.attention(
            &TensorView::from_slice(&q, &shape)?,
            &TensorView::from_slice(&k, &shape)?,
            &TensorView::from_slice(&v, &shape)?,
            &mut TensorViewMut::from_slice(&mut o, &shape)?,
            &ForwardParams::new().mode(mode),
        )?;
        let path = std::path::Path::new(&out_dir).join(format!("rust_{}.txt", name));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for x in &o {
            writeln!(f, "{:08x}", x.to_bits())?;
        }
        f.flush()?;
        println!("rust: wrote {}", path.display());
    }
    Ok(())
}
