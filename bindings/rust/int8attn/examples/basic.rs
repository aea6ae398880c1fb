//! Run one attention call in each precision mode on the CPU and print the error against EXACT.
//!
//!     cargo run --example basic
use int8attn::{Context, ForwardParams, Mode, TensorView, TensorViewMut};

fn main() -> Result<(), int8attn::Error> {
    println!("int8attn {} (ABI {}), features {:#x}", int8attn::version(), int8attn::abi_version(), int8attn::features().0);
    let (b, h, n, d) = (1i64, 4i64, 256i64, 64i64);
    let len = (b * h * n * d) as usize;
    let gen = |c: f32| -> Vec<f32> { (0..len).map(|i| (0.37 * i as f32 + c).sin()).collect() };
    let (q, k, v) = (gen(1.0), gen(2.0), gen(3.0));
    let shape = [b, h, n, d];
    let ctx = Context::new()?;
    let mut reference = vec![0f32; len];
    for mode in [Mode::Exact, Mode::Balanced, Mode::Fast] {
        let mut o = vec![0f32; len];
        ctx.attention(
            &TensorView::from_slice(&q, &shape)?,
            &TensorView::from_slice(&k, &shape)?,
            &TensorView::from_slice(&v, &shape)?,
            &mut TensorViewMut::from_slice(&mut o, &shape)?,
            &ForwardParams::new().mode(mode),
        )?;
        if mode == Mode::Exact {
            reference.copy_from_slice(&o);
        }
        let max_err = o.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        println!("{:?}: max |O - O_exact| = {:.3e}", mode, max_err);
    }
    Ok(())
}
