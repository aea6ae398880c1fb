//! Integration tests of the safe crate against the library's CPU backend.

use int8attn::half::{f16_bits_to_f32, f32_to_f16_bits};
use int8attn::*;

/// Deterministic pseudo-random data in [-1, 1] plus an optional per-channel bias.
fn data(len: usize, seed: u64, d: usize, bias: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0;
            u as f32 + bias * ((i % d) % 3) as f32
        })
        .collect()
}

struct Problem {
    b: usize,
    hq: usize,
    hkv: usize,
    nq: usize,
    nk: usize,
    d: usize,
}

/// float64 reference: O and LSE for contiguous [B,H,N,D] inputs.
fn reference(p: &Problem, q: &[f32], k: &[f32], v: &[f32], causal: bool, lengths: Option<&[i32]>) -> (Vec<f32>, Vec<f32>) {
    let scale = 1.0 / (p.d as f64).sqrt();
    let g = p.hq / p.hkv;
    let mut o = vec![0f32; p.b * p.hq * p.nq * p.d];
    let mut lse = vec![0f32; p.b * p.hq * p.nq];
    for b in 0..p.b {
        let len = lengths.map(|l| l[b] as usize).unwrap_or(p.nk);
        for h in 0..p.hq {
            let hk = h / g;
            for i in 0..p.nq {
                let qi = &q[((b * p.hq + h) * p.nq + i) * p.d..][..p.d];
                let mut scores = Vec::new();
                for j in 0..len {
                    if causal && (j as i64) > i as i64 + len as i64 - p.nq as i64 {
                        continue;
                    }
                    let kj = &k[((b * p.hkv + hk) * p.nk + j) * p.d..][..p.d];
                    let s: f64 = qi.iter().zip(kj).map(|(&a, &c)| a as f64 * c as f64).sum::<f64>() * scale;
                    scores.push((j, s));
                }
                let row = (b * p.hq + h) * p.nq + i;
                if scores.is_empty() {
                    lse[row] = f32::NEG_INFINITY;
                    continue;
                }
                let m = scores.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = scores.iter().map(|x| (x.1 - m).exp()).sum();
                lse[row] = (m + z.ln()) as f32;
                for c in 0..p.d {
                    let mut acc = 0f64;
                    for &(j, s) in &scores {
                        acc += (s - m).exp() / z * v[((b * p.hkv + hk) * p.nk + j) * p.d + c] as f64;
                    }
                    o[row * p.d + c] = acc as f32;
                }
            }
        }
    }
    (o, lse)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn qkv(p: &Problem) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        data(p.b * p.hq * p.nq * p.d, 1, p.d, 0.0),
        data(p.b * p.hkv * p.nk * p.d, 2, p.d, 0.5),
        data(p.b * p.hkv * p.nk * p.d, 3, p.d, 0.25),
    )
}

fn run(ctx: &Context, p: &Problem, q: &[f32], k: &[f32], v: &[f32], params: &ForwardParams) -> Result<Vec<f32>> {
    let mut o = vec![0f32; q.len()];
    ctx.attention(
        &TensorView::from_slice(q, &[p.b as i64, p.hq as i64, p.nq as i64, p.d as i64])?,
        &TensorView::from_slice(k, &[p.b as i64, p.hkv as i64, p.nk as i64, p.d as i64])?,
        &TensorView::from_slice(v, &[p.b as i64, p.hkv as i64, p.nk as i64, p.d as i64])?,
        &mut TensorViewMut::from_slice(&mut o, &[p.b as i64, p.hq as i64, p.nq as i64, p.d as i64])?,
        params,
    )?;
    Ok(o)
}

const P: Problem = Problem { b: 2, hq: 2, hkv: 2, nq: 70, nk: 70, d: 40 };
/// P's queries against more than 512 keys: with fewer (of 40 channels) every mode runs EXACT, so
/// tests of the modes' differences use this one.
const P_MODES: Problem = Problem { b: 2, hq: 2, hkv: 2, nq: 70, nk: 520, d: 40 };

#[test]
fn versions_and_features() {
    assert_eq!(abi_version(), ABI_VERSION);
    assert_eq!(version_number(), sys::INT8ATTN_VERSION_NUMBER);
    assert_eq!(version().as_bytes(), &sys::INT8ATTN_VERSION_STRING[..sys::INT8ATTN_VERSION_STRING.len() - 1]);
    assert!(features().cpu());
    check_abi().unwrap();
    let n = device_count().unwrap();
    assert!(n >= 0);
    if !features().cuda() {
        assert_eq!(n, 0);
        assert!(device_describe(0).is_err());
    }
}

#[test]
fn exact_matches_float64_reference() {
    let ctx = Context::new().unwrap();
    let (q, k, v) = qkv(&P);
    let (o_ref, _) = reference(&P, &q, &k, &v, false, None);
    let o = run(&ctx, &P, &q, &k, &v, &ForwardParams::new().mode(Mode::Exact)).unwrap();
    let err = max_abs_diff(&o, &o_ref);
    assert!(err < 1e-4, "EXACT error {}", err);
}

#[test]
fn balanced_and_fast_are_close() {
    let ctx = Context::new().unwrap();
    let (q, k, v) = qkv(&P_MODES);
    let (o_ref, _) = reference(&P_MODES, &q, &k, &v, false, None);
    for (mode, tol) in [(Mode::Balanced, 2e-2f32), (Mode::Fast, 6e-2), (Mode::Default, 2e-2)] {
        let o = run(&ctx, &P_MODES, &q, &k, &v, &ForwardParams::new().mode(mode)).unwrap();
        let err = max_abs_diff(&o, &o_ref);
        assert!(err < tol, "{:?} error {}", mode, err);
        assert!(o.iter().all(|x| x.is_finite()));
    }
}

#[test]
fn causal_lse_gqa_and_lengths() {
    let p = Problem { b: 2, hq: 4, hkv: 2, nq: 33, nk: 77, d: 64 };
    let ctx = Context::new().unwrap();
    let (q, k, v) = qkv(&p);
    let lengths = [77i32, 50];
    let (o_ref, lse_ref) = reference(&p, &q, &k, &v, true, Some(&lengths));
    let mut lse = vec![0f32; p.b * p.hq * p.nq];
    let len_view = TensorView::from_slice(&lengths, &[2]).unwrap();
    let o = {
        let mut lse_view = TensorViewMut::from_slice(&mut lse, &[p.b as i64, p.hq as i64, p.nq as i64]).unwrap();
        let params = ForwardParams::new().mode(Mode::Exact).causal(true).k_lengths(&len_view).lse(&mut lse_view);
        run(&ctx, &p, &q, &k, &v, &params).unwrap()
    }; // the borrow of `lse` ends here
    assert!(max_abs_diff(&o, &o_ref) < 1e-4, "O error {}", max_abs_diff(&o, &o_ref));
    assert!(max_abs_diff(&lse, &lse_ref) < 1e-4, "LSE error {}", max_abs_diff(&lse, &lse_ref));
}

#[test]
fn nhd_strides_equal_hnd() {
    let ctx = Context::new().unwrap();
    let (q, k, v) = qkv(&P);
    let o_hnd = run(&ctx, &P, &q, &k, &v, &ForwardParams::new().mode(Mode::Exact)).unwrap();
    // Repack to [B, N, H, D] memory.
    let (b, h, n, d) = (P.b, P.hq, P.nq, P.d);
    let to_nhd = |x: &[f32]| {
        let mut y = vec![0f32; x.len()];
        for bi in 0..b {
            for hi in 0..h {
                for ni in 0..n {
                    for di in 0..d {
                        y[((bi * n + ni) * h + hi) * d + di] = x[((bi * h + hi) * n + ni) * d + di];
                    }
                }
            }
        }
        y
    };
    let (qn, kn, vn) = (to_nhd(&q), to_nhd(&k), to_nhd(&v));
    let shape = [b as i64, h as i64, n as i64, d as i64];
    let strides = nhd_strides(shape);
    let mut on = vec![0f32; qn.len()];
    ctx.attention(
        &TensorView::strided(&qn, &shape, &strides).unwrap(),
        &TensorView::strided(&kn, &shape, &strides).unwrap(),
        &TensorView::strided(&vn, &shape, &strides).unwrap(),
        &mut TensorViewMut::strided(&mut on, &shape, &strides).unwrap(),
        &ForwardParams::new().mode(Mode::Exact),
    )
    .unwrap();
    assert!(max_abs_diff(&on, &to_nhd(&o_hnd)) < 1e-6);
}

#[test]
fn fp16_inputs_and_output() {
    let ctx = Context::new().unwrap();
    let (q, k, v) = qkv(&P);
    let h = |x: &[f32]| x.iter().map(|&f| f32_to_f16_bits(f)).collect::<Vec<u16>>();
    let (qh, kh, vh) = (h(&q), h(&k), h(&v));
    let back = |x: &[u16]| x.iter().map(|&b| f16_bits_to_f32(b)).collect::<Vec<f32>>();
    let (o_ref, _) = reference(&P, &back(&qh), &back(&kh), &back(&vh), false, None);
    let shape = [P.b as i64, P.hq as i64, P.nq as i64, P.d as i64];
    let mut oh = vec![0u16; qh.len()];
    ctx.attention(
        &TensorView::from_f16_bits(&qh, &shape, None).unwrap(),
        &TensorView::from_f16_bits(&kh, &shape, None).unwrap(),
        &TensorView::from_f16_bits(&vh, &shape, None).unwrap(),
        &mut TensorViewMut::from_f16_bits(&mut oh, &shape, None).unwrap(),
        &ForwardParams::new().mode(Mode::Exact),
    )
    .unwrap();
    let err = max_abs_diff(&back(&oh), &o_ref);
    assert!(err < 2e-3, "fp16 EXACT error {}", err);
}

#[test]
fn errors_carry_status_and_message_and_write_nothing() {
    let ctx = Context::new().unwrap();
    let n = 16usize;
    let x = vec![0.5f32; n * 12];
    let shape = [1i64, 1, n as i64, 12];
    let mut o = vec![7f32; n * 12];
    let v = TensorView::from_slice(&x, &shape).unwrap();
    let err = ctx
        .attention(&v, &v, &v, &mut TensorViewMut::from_slice(&mut o, &shape).unwrap(), &ForwardParams::new())
        .unwrap_err();
    assert_eq!(err.status, Status::UNSUPPORTED_HEAD_DIM, "{}", err);
    assert!(!err.message.is_empty());
    assert!(err.message.contains("12"), "message should name the value: {}", err.message);
    assert!(o.iter().all(|&x| x == 7.0), "output written on error");

    // Mismatched shapes.
    let q = vec![0f32; 2 * 8 * 16];
    let k = vec![0f32; 3 * 8 * 16];
    let mut o = vec![7f32; 2 * 8 * 16];
    let err = ctx
        .attention(
            &TensorView::from_slice(&q, &[1, 1, 16, 16]).unwrap(),
            &TensorView::from_slice(&k, &[1, 1, 24, 16]).unwrap(),
            &TensorView::from_slice(&k, &[1, 1, 24, 8]).unwrap(),
            &mut TensorViewMut::from_slice(&mut o, &[1, 1, 16, 16]).unwrap(),
            &ForwardParams::new(),
        )
        .unwrap_err();
    assert!(err.status.is_invalid_argument(), "{}", err);
    assert!(o.iter().all(|&x| x == 7.0));

    // A NaN softmax scale.
    let a = vec![0f32; 16 * 8];
    let mut o = vec![7f32; 16 * 8];
    let t = TensorView::from_slice(&a, &[1, 1, 16, 8]).unwrap();
    let err = ctx
        .attention(&t, &t, &t, &mut TensorViewMut::from_slice(&mut o, &[1, 1, 16, 8]).unwrap(), &ForwardParams::new().sm_scale(f32::NAN))
        .unwrap_err();
    assert_eq!(err.status, Status::BAD_VALUE, "{}", err);

    // Host slices that are too short are rejected before the library is called.
    let err = TensorView::from_slice(&a, &[1, 1, 17, 8]).unwrap_err();
    assert_eq!(err.status, Status::BAD_SHAPE);

    // Display includes both.
    let s = err.to_string();
    assert!(s.contains("102") && s.contains("addresses"), "{}", s);
}

#[test]
fn context_options_and_workspace() {
    let ctx = Context::with_options(&ContextOptions::new().num_threads(1)).unwrap();
    let (q, k, v) = qkv(&P);
    let shape = [P.b as i64, P.hq as i64, P.nq as i64, P.d as i64];
    let params = ForwardParams::new();
    let bytes = ctx
        .attention_workspace_size(
            &TensorView::from_slice(&q, &shape).unwrap(),
            &TensorView::from_slice(&k, &shape).unwrap(),
            &TensorView::from_slice(&v, &shape).unwrap(),
            &params,
        )
        .unwrap();
    let _ = bytes;
    ctx.reserve_workspace(DeviceType::Cpu, 1 << 16).unwrap();
    ctx.synchronize().unwrap();
    let err = Context::with_options(&ContextOptions::new().num_threads(-1)).unwrap_err();
    assert_eq!(err.status, Status::BAD_VALUE, "{}", err);
    // One thread and the default pool give the same bits.
    let ctx_all = Context::new().unwrap();
    let o1 = run(&ctx, &P, &q, &k, &v, &ForwardParams::new().mode(Mode::Balanced)).unwrap();
    let o2 = run(&ctx_all, &P, &q, &k, &v, &ForwardParams::new().mode(Mode::Balanced)).unwrap();
    assert_eq!(o1, o2, "results depend on the thread count");
}

#[test]
fn policy_maps_steps_to_modes() {
    let mut p = Policy::new(10).unwrap();
    assert_eq!(p.num_timesteps().unwrap(), 10);
    assert_eq!(p.get(0).unwrap().0, Mode::Exact);
    assert_eq!(p.get(5).unwrap().0, Mode::Fast);
    assert_eq!(p.get(9).unwrap().0, Mode::Exact);
    assert_eq!(p.get(5).unwrap().1, 1.0);
    p.set_mode(5, Mode::Balanced).unwrap();
    assert_eq!(p.get(5).unwrap().0, Mode::Balanced);
    assert_eq!(p.get(10).unwrap_err().status, Status::BAD_VALUE);
    assert!(p.set_mode(0, Mode::Default).is_err());

    let mults: Vec<f32> = (0..4).map(|i| 1.0 - 0.1 * i as f32).collect();
    let p2 = Policy::builder()
        .num_timesteps(4)
        .default_mode(Mode::Balanced)
        .edges(0, 1)
        .scale_multipliers(&mults)
        .build()
        .unwrap();
    assert_eq!(p2.get(0).unwrap(), (Mode::Balanced, 1.0));
    assert_eq!(p2.get(2).unwrap(), (Mode::Balanced, mults[2]));
    assert_eq!(p2.get(3).unwrap().0, Mode::Exact);

    let sigmas = [14.6f32, 8.0, 3.0, 1.0, 0.3, 0.03];
    let p3 = Policy::builder().sigmas(&sigmas).edges(0, 0).sigma_edges(10.0, 0.1).build().unwrap();
    assert_eq!(p3.num_timesteps().unwrap(), 6);
    assert_eq!(p3.get(0).unwrap().0, Mode::Exact);
    assert_eq!(p3.get(2).unwrap().0, Mode::Fast);
    assert_eq!(p3.get(5).unwrap().0, Mode::Exact);

    let err = Policy::builder().num_timesteps(0).build().unwrap_err();
    assert_eq!(err.status, Status::BAD_VALUE, "{}", err);
    assert!(Policy::builder().num_timesteps(4).scale_multipliers(&[1.0]).build().is_err());
    let bad = [1.0f32, 0.0];
    assert!(Policy::builder().num_timesteps(2).scale_multipliers(&bad).build().is_err());
}

#[test]
fn forward_with_policy_uses_the_step_mode() {
    let ctx = Context::new().unwrap();
    let p = &P_MODES;
    let (q, k, v) = qkv(p);
    let policy = Policy::new(20).unwrap();
    let exact = run(&ctx, p, &q, &k, &v, &ForwardParams::new().mode(Mode::Exact)).unwrap();
    let fast = run(&ctx, p, &q, &k, &v, &ForwardParams::new().mode(Mode::Fast)).unwrap();
    let at0 = run(&ctx, p, &q, &k, &v, &ForwardParams::new().policy(&policy, 0)).unwrap();
    let at7 = run(&ctx, p, &q, &k, &v, &ForwardParams::new().policy(&policy, 7)).unwrap();
    assert_ne!(exact, fast, "the modes are distinguishable");
    assert_eq!(at0, exact);
    assert_eq!(at7, fast);
}

#[test]
fn kv_cache_append_and_forward() {
    let ctx = Context::new().unwrap();
    let p = Problem { b: 1, hq: 4, hkv: 2, nq: 3, nk: 100, d: 64 };
    let (q, k, v) = qkv(&p);
    let (o_ref, _) = reference(&p, &q, &k, &v, false, None);
    let opts = KvCacheOptions::new(1, 2, 128, 64).device(DeviceType::Cpu);
    let mut cache = ctx.kv_cache(&opts).unwrap();
    assert!(cache.is_empty().unwrap());
    // Append in two chunks of 60 and 40 tokens: strided views into the full K/V.
    for (start, len) in [(0usize, 60usize), (60, 40)] {
        let kk: Vec<f32> = (0..2).flat_map(|h| k[(h * 100 + start) * 64..(h * 100 + start + len) * 64].to_vec()).collect();
        let vv: Vec<f32> = (0..2).flat_map(|h| v[(h * 100 + start) * 64..(h * 100 + start + len) * 64].to_vec()).collect();
        let shape = [1i64, 2, len as i64, 64];
        cache
            .append(&TensorView::from_slice(&kk, &shape).unwrap(), &TensorView::from_slice(&vv, &shape).unwrap())
            .unwrap();
    }
    assert_eq!(cache.len().unwrap(), 100);
    let mut o = vec![0f32; q.len()];
    let qv = TensorView::from_slice(&q, &[1, 4, 3, 64]).unwrap();
    cache
        .forward(&ctx, &qv, &mut TensorViewMut::from_slice(&mut o, &[1, 4, 3, 64]).unwrap(), &ForwardParams::new())
        .unwrap();
    let err = max_abs_diff(&o, &o_ref);
    assert!(err < 3e-2, "cache error {}", err);

    // Capacity: 100 + 40 > 128 fails and leaves the cache unchanged.
    let extra = vec![0f32; 2 * 40 * 64];
    let ev = TensorView::from_slice(&extra, &[1, 2, 40, 64]).unwrap();
    let e = cache.append(&ev, &ev).unwrap_err();
    assert_eq!(e.status, Status::CAPACITY_EXCEEDED, "{}", e);
    assert_eq!(cache.len().unwrap(), 100);
    cache.reset().unwrap();
    assert_eq!(cache.len().unwrap(), 0);
}

#[test]
fn quantize_round_trips() {
    let ctx = Context::new().unwrap();
    let (b, h, n, d) = (1usize, 2usize, 100usize, 32usize);
    let x = data(b * h * n * d, 9, d, 0.3);
    let qb = sys::INT8ATTN_QUANT_BLOCK as usize; // tokens per scale
    let g = (n + qb - 1) / qb;
    let mut xi = vec![0i8; x.len()];
    let mut scales = vec![0f32; b * h * g];
    let mut mean = vec![0f32; b * h * d];
    ctx.quantize(
        &TensorView::from_slice(&x, &[b as i64, h as i64, n as i64, d as i64]).unwrap(),
        &mut TensorViewMut::from_slice(&mut xi, &[b as i64, h as i64, n as i64, d as i64]).unwrap(),
        &mut TensorViewMut::from_slice(&mut scales, &[b as i64, h as i64, g as i64]).unwrap(),
        Some(&mut TensorViewMut::from_slice(&mut mean, &[b as i64, h as i64, d as i64]).unwrap()),
        &QuantizeParams::new().smooth(true),
    )
    .unwrap();
    for hi in 0..h {
        for t in 0..n {
            for c in 0..d {
                let idx = (hi * n + t) * d + c;
                let s = scales[hi * g + t / qb];
                let back = xi[idx] as f32 * s + mean[hi * d + c];
                assert!((back - x[idx]).abs() <= 0.5 * s * 1.001 + 1e-6, "at {}: {} vs {}", idx, back, x[idx]);
            }
        }
    }
    // Smoothing without a mean output is an error.
    let mut xi2 = vec![0i8; x.len()];
    let mut s2 = vec![0f32; b * h * g];
    let e = ctx
        .quantize(
            &TensorView::from_slice(&x, &[b as i64, h as i64, n as i64, d as i64]).unwrap(),
            &mut TensorViewMut::from_slice(&mut xi2, &[b as i64, h as i64, n as i64, d as i64]).unwrap(),
            &mut TensorViewMut::from_slice(&mut s2, &[b as i64, h as i64, g as i64]).unwrap(),
            None,
            &QuantizeParams::new().smooth(true),
        )
        .unwrap_err();
    assert!(e.status.is_invalid_argument(), "{}", e);
}

#[test]
fn rotary_is_the_float32_formula() {
    let ctx = Context::new().unwrap();
    let (b, h, n, d) = (1usize, 2usize, 5usize, 8usize);
    let x = data(b * h * n * d, 11, d, 0.0);
    let cos = data(n * d, 12, d, 0.0);
    let sin = data(n * d, 13, d, 0.0);
    let shape = [b as i64, h as i64, n as i64, d as i64];
    // Each arithmetic against its formula: (x0, x1, c0, s0, c1, s1) -> (y0, y1).
    type Formula = fn(f32, f32, f32, f32, f32, f32) -> (f32, f32);
    let cases: [(RotaryArithmetic, Formula); 2] = [
        // each product and sum rounded on its own
        (RotaryArithmetic::Rounded, |x0, x1, c0, s0, c1, s1| (x0 * c0 - x1 * s0, x1 * c1 + x0 * s1)),
        // the complex product: one fused multiply-add per part (f32::mul_add)
        (RotaryArithmetic::ComplexFma, |x0, x1, c0, s0, c1, s1| {
            (x0.mul_add(c0, -(x1 * s0)), x0.mul_add(s1, x1 * c1))
        }),
    ];
    for (arithmetic, formula) in cases {
        let mut out = vec![0f32; x.len()];
        ctx.rotary(
            &TensorView::from_slice(&x, &shape).unwrap(),
            &TensorView::from_slice(&cos, &[n as i64, d as i64]).unwrap(),
            &TensorView::from_slice(&sin, &[n as i64, d as i64]).unwrap(),
            &mut TensorViewMut::from_slice(&mut out, &shape).unwrap(),
            &RotaryParams::new().arithmetic(arithmetic),
        )
        .unwrap();
        for row in 0..h * n {
            let t = row % n;
            for i in (0..d).step_by(2) {
                let (c, s) = (&cos[t * d..], &sin[t * d..]);
                let (y0, y1) = formula(x[row * d + i], x[row * d + i + 1], c[i], s[i], c[i + 1], s[i + 1]);
                assert_eq!(out[row * d + i].to_bits(), y0.to_bits(), "{arithmetic:?}");
                assert_eq!(out[row * d + i + 1].to_bits(), y1.to_bits(), "{arithmetic:?}");
            }
        }
    }
}

/// float32 reference of rms_norm over contiguous rows of `d`: `x / sqrt(mean(x²) + eps) · w`.
fn rms_norm_reference(x: &[f32], d: usize, weight: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for (row, out) in x.chunks(d).zip(y.chunks_mut(d)) {
        let ss: f32 = row.iter().map(|v| v * v).sum();
        let r = 1.0 / (ss / d as f32 + eps).sqrt();
        for c in 0..d {
            out[c] = row[c] * r * weight.map_or(1.0, |w| w[c]);
        }
    }
    y
}

fn assert_rel_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * w.abs(), "{}: element {}: {} instead of {}", what, i, g, w);
    }
}

#[test]
fn rms_norm_is_the_float32_formula() {
    let ctx = Context::new().unwrap();
    let (b, h, n, d) = (1usize, 2usize, 3usize, 8usize);
    let shape = [b as i64, h as i64, n as i64, d as i64];
    let x = data(b * h * n * d, 14, d, 0.5);
    let w = data(d, 15, d, 1.0);
    assert_eq!(RmsNormParams::new().as_raw().eps, 1e-6, "default eps");

    // With a float32 weight, default eps (1e-6).
    let mut out = vec![0f32; x.len()];
    ctx.rms_norm(
        &TensorView::from_slice(&x, &shape).unwrap(),
        Some(&TensorView::from_slice(&w, &[d as i64]).unwrap()),
        &mut TensorViewMut::from_slice(&mut out, &shape).unwrap(),
        &RmsNormParams::new(),
    )
    .unwrap();
    let want = rms_norm_reference(&x, d, Some(&w), 1e-6);
    assert_rel_close(&out, &want, 1e-6, "weight");

    // Without a weight, and an eps large enough to matter.
    ctx.rms_norm(
        &TensorView::from_slice(&x, &shape).unwrap(),
        None,
        &mut TensorViewMut::from_slice(&mut out, &shape).unwrap(),
        &RmsNormParams::new().eps(0.5),
    )
    .unwrap();
    assert_rel_close(&out, &rms_norm_reference(&x, d, None, 0.5), 1e-6, "no weight, eps 0.5");

    // In place gives the out-of-place result.
    let mut y = x.clone();
    ctx.rms_norm_in_place(
        &mut TensorViewMut::from_slice(&mut y, &shape).unwrap(),
        Some(&TensorView::from_slice(&w, &[d as i64]).unwrap()),
        &RmsNormParams::new(),
    )
    .unwrap();
    assert_rel_close(&y, &want, 1e-6, "in place");

    // A weight of the wrong length is an error that names it, and nothing is written.
    let mut out = vec![7f32; x.len()];
    let e = ctx
        .rms_norm(
            &TensorView::from_slice(&x, &shape).unwrap(),
            Some(&TensorView::from_slice(&w[..d - 1], &[d as i64 - 1]).unwrap()),
            &mut TensorViewMut::from_slice(&mut out, &shape).unwrap(),
            &RmsNormParams::new(),
        )
        .unwrap_err();
    assert_eq!(e.status, Status::BAD_SHAPE, "{}", e);
    assert!(e.message.contains("weight"), "message should name the weight: {}", e.message);
    assert!(out.iter().all(|&v| v == 7.0), "output written on error");

    // A negative eps is rejected.
    let e = ctx
        .rms_norm(
            &TensorView::from_slice(&x, &shape).unwrap(),
            None,
            &mut TensorViewMut::from_slice(&mut out, &shape).unwrap(),
            &RmsNormParams::new().eps(-1.0),
        )
        .unwrap_err();
    assert!(e.status.is_invalid_argument(), "{}", e);
}

#[test]
fn mask_block_defaults_are_the_header_constants() {
    // ForwardParams::block_mask and MaskParams::blocks override these; callers that size a mask
    // for the defaults use the sys constants, so the init functions must agree with them.
    let f = ForwardParams::new();
    assert_eq!(f.as_raw().mask_q_block, sys::INT8ATTN_MASK_Q_BLOCK_DEFAULT as i32);
    assert_eq!(f.as_raw().mask_k_block, sys::INT8ATTN_MASK_K_BLOCK_DEFAULT as i32);
    let m = MaskParams::new();
    assert_eq!(m.as_raw().q_block, sys::INT8ATTN_MASK_Q_BLOCK_DEFAULT as i32);
    assert_eq!(m.as_raw().k_block, sys::INT8ATTN_MASK_K_BLOCK_DEFAULT as i32);
}

#[test]
fn block_mask_predict_and_use() {
    let ctx = Context::new().unwrap();
    let p = Problem { b: 1, hq: 2, hkv: 2, nq: 128, nk: 256, d: 64 };
    let (q, k, v) = qkv(&p);
    let (qb, kb) = (64i64, 64i64);
    let (nqb, nkb) = (2i64, 4i64);
    let mut mask = vec![0u8; (2 * nqb * nkb) as usize];
    ctx.predict_block_mask(
        &TensorView::from_slice(&q, &[1, 2, 128, 64]).unwrap(),
        &TensorView::from_slice(&k, &[1, 2, 256, 64]).unwrap(),
        &mut TensorViewMut::from_slice(&mut mask, &[1, 2, nqb, nkb]).unwrap(),
        &MaskParams::new().blocks(qb as i32, kb as i32).keep_ratio(1.0),
    )
    .unwrap();
    assert!(mask.iter().all(|&m| m != 0), "keep_ratio 1 keeps every block: {:?}", mask);
    // A dense mask gives the dense result exactly.
    let mv = TensorView::from_slice(&mask, &[1, 2, nqb, nkb]).unwrap();
    let dense = run(&ctx, &p, &q, &k, &v, &ForwardParams::new().mode(Mode::Exact)).unwrap();
    let masked = run(&ctx, &p, &q, &k, &v, &ForwardParams::new().mode(Mode::Exact).block_mask(&mv, qb as i32, kb as i32)).unwrap();
    assert_eq!(dense, masked);
}

#[test]
fn contexts_move_between_threads_and_policies_are_shared() {
    let policy = Policy::new(8).unwrap();
    let (q, k, v) = qkv(&P);
    let expected = run(&Context::new().unwrap(), &P, &q, &k, &v, &ForwardParams::new().policy(&policy, 3)).unwrap();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for _ in 0..2 {
            let ctx = Context::new().unwrap(); // created here, moved into the thread (Send)
            let (policy, q, k, v) = (&policy, &q, &k, &v); // &Policy crosses threads (Sync)
            handles.push(s.spawn(move || run(&ctx, &P, q, k, v, &ForwardParams::new().policy(policy, 3)).unwrap()));
        }
        for h in handles {
            assert_eq!(h.join().unwrap(), expected);
        }
    });
}
