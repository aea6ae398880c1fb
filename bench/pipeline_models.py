"""Model table for bench/pipeline.py: diffusers denoisers with their published configs.

Every entry is the ``__init__`` keyword arguments of a diffusers 0.42.1 class, copied from the
``config.json`` of the published checkpoint named in ``source`` (only keys that differ from the
class defaults *or* that define the architecture are written out; where the JSON and the class
default agree the value is still spelled out so the table reads on its own). The weights are
random (seeded); nothing is downloaded.

Each entry also says how a pipeline calls the denoiser for one sampler step at the stated
resolution (CFG batch, latent shape, text tokens), and ``make_inputs`` builds those inputs as
fixed random tensors.

``TINY`` holds small versions of the same architectures (1-2 blocks, narrow, a few dozen
tokens, float32) for a CPU smoke test of the script.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import torch


@dataclass(frozen=True)
class ModelSpec:
    """One benchmarked denoiser.

    Attributes:
        name: Key on the command line (``--models``).
        cls: diffusers class name.
        config: ``cls(**config)``.
        dtype: "float16" / "bfloat16" / "float32" (what users run the model in).
        family: Which input builder applies ("unet", "pixart", "sd3", "flux", "qwenimage",
            "zimage", "wan", "hunyuan", "hunyuan15", "ltx", "cogvideox", "mochi", "flux2",
            "auraflow").
        inputs: Sizes of the step's inputs (batch, latent shape, text tokens, ...).
        description: Resolution and batch, in words.
        source: Where ``config`` comes from.
        attention: The attention layers' token counts and head shapes, in words.
        depth: Config keys holding transformer depth, main stack first (``--layers`` cuts them).
    """

    name: str
    cls: str
    config: Dict[str, Any]
    dtype: str
    family: str
    inputs: Dict[str, Any]
    description: str
    source: str
    attention: str
    depth: Tuple[str, ...] = ()
    layers_cut: Optional[Dict[str, Any]] = field(default=None)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def with_layers(self, n: Optional[int]) -> "ModelSpec":
        """This spec with its transformer stacks cut to ``n`` blocks (the main stack; other stacks
        keep their published ratio to it, e.g. Flux's 38 single blocks to 19 double blocks).
        UNets (no ``depth``) and ``n`` at or above full depth are returned unchanged."""
        if n is None or not self.depth:
            return self
        main = int(self.config[self.depth[0]])
        if n >= main:
            return self
        cfg = dict(self.config)
        cut = {}
        for key in self.depth:
            full = int(cfg[key])
            cfg[key] = max(1, min(full, round(full * n / main)))
            cut[key] = {"published": full, "used": cfg[key]}
        return dataclasses.replace(self, config=cfg, layers_cut=cut)


# ---- the published configs ------------------------------------------------------------------

_SD15_UNET = dict(
    # runwayml/stable-diffusion-v1-5, unet/config.json
    sample_size=64, in_channels=4, out_channels=4, center_input_sample=False,
    flip_sin_to_cos=True, freq_shift=0,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                      "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                    "CrossAttnUpBlock2D"),
    block_out_channels=(320, 640, 1280, 1280), layers_per_block=2, downsample_padding=1,
    mid_block_scale_factor=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-5,
    cross_attention_dim=768,
    # diffusers' legacy naming: for SD1.x "attention_head_dim" is the number of heads (8), so the
    # head dims are 320/8=40, 640/8=80, 1280/8=160.
    attention_head_dim=8,
)

_SDXL_UNET = dict(
    # stabilityai/stable-diffusion-xl-base-1.0, unet/config.json
    sample_size=128, in_channels=4, out_channels=4, center_input_sample=False,
    flip_sin_to_cos=True, freq_shift=0,
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    mid_block_type="UNetMidBlock2DCrossAttn",
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    block_out_channels=(320, 640, 1280), layers_per_block=2, downsample_padding=1,
    mid_block_scale_factor=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-5,
    cross_attention_dim=2048, transformer_layers_per_block=(1, 2, 10),
    # heads per level (legacy naming, see SD1.5): 640/10 = 1280/20 = 64 = head dim everywhere.
    attention_head_dim=(5, 10, 20), use_linear_projection=True,
    addition_embed_type="text_time", addition_time_embed_dim=256,
    projection_class_embeddings_input_dim=2816,  # 1280 (pooled text) + 6 * 256 (time ids)
    upcast_attention=False,  # null in the JSON
)

_PIXART_SIGMA = dict(
    # PixArt-alpha/PixArt-Sigma-XL-2-1024-MS, transformer/config.json: self-attention over the
    # image, cross-attention to 300 T5 tokens under the prompt's padding mask (diffusers makes it
    # additive: 0 or -10000), AdaLN-single, no micro-conditions
    num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=8, num_layers=28,
    norm_num_groups=32, cross_attention_dim=1152, attention_bias=True, sample_size=128,
    patch_size=2, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
    upcast_attention=False, norm_type="ada_norm_single", norm_elementwise_affine=False,
    norm_eps=1e-6, interpolation_scale=2, use_additional_conditions=False, caption_channels=4096,
    attention_type="default",
)

_SD3_MEDIUM = dict(
    # stabilityai/stable-diffusion-3-medium-diffusers, transformer/config.json
    sample_size=128, patch_size=2, in_channels=16, out_channels=16, num_layers=24,
    attention_head_dim=64, num_attention_heads=24, joint_attention_dim=4096,
    caption_projection_dim=1536, pooled_projection_dim=2048, pos_embed_max_size=192,
    dual_attention_layers=(), qk_norm=None,  # SD3.5's additions, absent from SD3-medium
)

_SD35_LARGE = dict(
    # stabilityai/stable-diffusion-3.5-large, transformer/config.json: query/key RMSNorms
    # (diffusers' class) in every joint block
    sample_size=128, patch_size=2, in_channels=16, out_channels=16, num_layers=38,
    attention_head_dim=64, num_attention_heads=38, joint_attention_dim=4096,
    caption_projection_dim=2432, pooled_projection_dim=2048, pos_embed_max_size=192,
    dual_attention_layers=(), qk_norm="rms_norm",
)

_AURAFLOW = dict(
    # fal/AuraFlow-v0.3, transformer/config.json: 4 joint (MMDiT) blocks then 32 single-stream
    # blocks over image and text tokens, 12 heads x 256, no rotary embedding and no Q/K norms.
    # pos_embed_max_size (the position table's size; 1024 px needs 4096 of its positions) is
    # v0.3's 9216 as recalled, not read from the file here; it does not change a step's work.
    sample_size=64, patch_size=2, in_channels=4, num_mmdit_layers=4, num_single_dit_layers=32,
    attention_head_dim=256, num_attention_heads=12, joint_attention_dim=2048,
    caption_projection_dim=3072, out_channels=4, pos_embed_max_size=9216,
)

_FLUX_DEV = dict(
    # black-forest-labs/FLUX.1-dev, transformer/config.json
    patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
    attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096,
    pooled_projection_dim=768, guidance_embeds=True, axes_dims_rope=(16, 56, 56),
)

_FLUX2_DEV = dict(
    # black-forest-labs/FLUX.2-dev, transformer/config.json (the class defaults): 8 double- and
    # 48 single-stream blocks, text from three of Mistral-Small-3.1's layers (3 x 5120 channels)
    patch_size=1, in_channels=128, out_channels=None, num_layers=8, num_single_layers=48,
    attention_head_dim=128, num_attention_heads=48, joint_attention_dim=15360,
    timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(32, 32, 32, 32),
    rope_theta=2000, eps=1e-6, guidance_embeds=True,
)

_WAN21_13B = dict(
    # Wan-AI/Wan2.1-T2V-1.3B-Diffusers, transformer/config.json
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
    out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
    cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None,
    added_kv_proj_dim=None, rope_max_seq_len=1024,
)

_WAN21_14B = dict(
    # Wan-AI/Wan2.1-T2V-14B-Diffusers, transformer/config.json
    patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
    out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40,
    cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None,
    added_kv_proj_dim=None, rope_max_seq_len=1024,
)

_HUNYUAN_VIDEO = dict(
    # hunyuanvideo-community/HunyuanVideo, transformer/config.json: diffusers' RMSNorm on Q and K,
    # rotary embedding imported inside the processor's call, a text-padding attention mask
    in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128,
    num_layers=20, num_single_layers=40, num_refiner_layers=2, mlp_ratio=4.0, patch_size=2,
    patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=4096,
    pooled_projection_dim=768, rope_theta=256.0, rope_axes_dim=(16, 56, 56),
)

_HUNYUAN_VIDEO_15 = dict(
    # hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v, transformer/config.json: a
    # joint padding mask [B, 1, N, N] built in every joint attention call, text from
    # Qwen2.5-VL (3584) and ByT5 (1472), SigLIP image tokens (1152; zeros for text-to-video)
    in_channels=65, out_channels=32, num_attention_heads=16, attention_head_dim=128,
    num_layers=54, num_refiner_layers=2, mlp_ratio=4.0, patch_size=1, patch_size_t=1,
    qk_norm="rms_norm", text_embed_dim=3584, text_embed_2_dim=1472, image_embed_dim=1152,
    rope_theta=256.0, rope_axes_dim=(16, 56, 56), target_size=640, task_type="t2v",
    use_meanflow=False,
)

_QWEN_IMAGE = dict(
    # Qwen/Qwen-Image, transformer/config.json: diffusers' RMSNorm on Q and K, its rotary
    # embedding as a complex product (``apply_rotary_emb_qwen``), text tokens first in the joint
    # attention
    patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
    num_attention_heads=24, joint_attention_dim=3584, guidance_embeds=False,
    axes_dims_rope=(16, 56, 56),
)

_Z_IMAGE_TURBO = dict(
    # Tongyi-MAI/Z-Image-Turbo, transformer/config.json: one stream over image then caption
    # tokens, diffusers' RMSNorm on Q and K, a complex rotary product defined inside the
    # processor's call. axes_lens (the length of the precomputed rotary tables, not a 1024 px
    # step's work) is left at the class default.
    all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=3840, n_layers=30,
    n_refiner_layers=2, n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True,
    cap_feat_dim=2560, rope_theta=256.0, t_scale=1000.0, axes_dims=(32, 48, 48),
)

_LTX_VIDEO = dict(
    # Lightricks/LTX-Video (0.9.x, 2B), transformer/config.json: Q/K RMSNorm across heads
    # (torch.nn.RMSNorm over 2048 channels), its own rotary function over the flattened heads
    in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
    attention_head_dim=64, cross_attention_dim=2048, num_layers=28,
    activation_fn="gelu-approximate", qk_norm="rms_norm_across_heads",
    norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=4096, attention_bias=True,
    attention_out_bias=True,
)

_MOCHI = dict(
    # genmo/mochi-1-preview, transformer/config.json (the class defaults): joint attention over
    # the video and each sample's valid text tokens, one SDPA call per sample (the processor
    # drops the padded text tokens instead of masking them)
    patch_size=2, num_attention_heads=24, attention_head_dim=128, num_layers=48,
    pooled_projection_dim=1536, in_channels=12, out_channels=None, qk_norm="rms_norm",
    text_embed_dim=4096, time_embed_dim=256, activation_fn="swiglu", max_sequence_length=256,
)

_COGVIDEOX_2B = dict(
    # THUDM/CogVideoX-2b, transformer/config.json (2B uses sin-cos position embeddings; RoPE is
    # the 5B's)
    num_attention_heads=30, attention_head_dim=64, in_channels=16, out_channels=16,
    flip_sin_to_cos=True, freq_shift=0, time_embed_dim=512, text_embed_dim=4096, num_layers=30,
    dropout=0.0, attention_bias=True, sample_width=90, sample_height=60, sample_frames=49,
    patch_size=2, temporal_compression_ratio=4, max_text_seq_length=226,
    activation_fn="gelu-approximate", timestep_activation_fn="silu",
    norm_elementwise_affine=True, norm_eps=1e-5, spatial_interpolation_scale=1.875,
    temporal_interpolation_scale=1.0, use_rotary_positional_embeddings=False,
    use_learned_positional_embeddings=False,
)


def _flux(name: str, px: int) -> ModelSpec:
    side = px // 16  # VAE /8, then 2x2 packing
    n_img = side * side
    return ModelSpec(
        name=name, cls="FluxTransformer2DModel", config=_FLUX_DEV, dtype="bfloat16",
        family="flux",
        inputs=dict(batch=1, side=side, channels=64, text_tokens=512, text_dim=4096,
                    pooled_dim=768, guidance=3.5),
        description=f"FLUX.1-dev {px}x{px}, batch 1 (guidance-distilled, no CFG), "
                    f"{n_img} image + 512 text tokens",
        source="black-forest-labs/FLUX.1-dev transformer/config.json",
        attention=f"19 double + 38 single blocks, joint self-attention over {n_img}+512 = "
                  f"{n_img + 512} tokens, 24 heads x 128",
        depth=("num_layers", "num_single_layers"))


def _flux2(name: str, px: int) -> ModelSpec:
    side = px // 16  # VAE /8, then 2x2 packing
    n_img = side * side
    return ModelSpec(
        name=name, cls="Flux2Transformer2DModel", config=_FLUX2_DEV, dtype="bfloat16",
        family="flux2",
        inputs=dict(batch=1, side=side, channels=128, text_tokens=512, text_dim=15360,
                    guidance=4.0),
        description=f"FLUX.2-dev {px}x{px}, batch 1 (guidance-distilled, no CFG), "
                    f"{n_img} image + 512 text tokens",
        source="black-forest-labs/FLUX.2-dev transformer/config.json",
        attention=f"8 double + 48 single blocks, joint self-attention over {n_img}+512 = "
                  f"{n_img + 512} tokens, 48 heads x 128",
        depth=("num_layers", "num_single_layers"))


def _wan(name: str, config: Dict[str, Any], size: str, px: Tuple[int, int],
         latent: Tuple[int, int]) -> ModelSpec:
    tokens = 21 * (latent[0] // 2) * (latent[1] // 2)  # 81 frames: 21 latent frames, 2x2 patches
    heads, blocks = config["num_attention_heads"], config["num_layers"]
    return ModelSpec(
        name=name, cls="WanTransformer3DModel", config=config, dtype="bfloat16", family="wan",
        inputs=dict(batch=2, channels=16, frames=21, latent=latent, text_tokens=512,
                    text_dim=4096),
        description=f"Wan2.1-T2V-{size}, {px[0]}x{px[1]} 81 frames (latent "
                    f"21x{latent[0]}x{latent[1]} -> {tokens} tokens), CFG batch 2, 512 text tokens",
        source=f"Wan-AI/Wan2.1-T2V-{size}-Diffusers transformer/config.json",
        attention=f"{blocks} blocks: self-attention over {tokens} tokens + cross-attention to "
                  f"512 tokens, {heads} heads x 128",
        depth=("num_layers",))


def _qwen_image(name: str, px: int) -> ModelSpec:
    side = px // 16  # VAE /8, then 2x2 patches
    n_img = side * side
    return ModelSpec(
        name=name, cls="QwenImageTransformer2DModel", config=_QWEN_IMAGE, dtype="bfloat16",
        family="qwenimage",
        inputs=dict(batch=1, side=side, channels=64, text_tokens=128, text_dim=3584),
        description=f"Qwen-Image, {px}x{px} (latent {2 * side}x{2 * side} -> {n_img} patches), "
                    "batch 1 (one of the step's two true-CFG calls), 128 text tokens (no "
                    "padding: the pipeline passes no mask then)",
        source="Qwen/Qwen-Image transformer/config.json",
        attention=f"60 joint blocks: RMS-normalized Q and K, complex rotary embedding, "
                  f"self-attention over 128+{n_img} = {n_img + 128} tokens, 24 heads x 128",
        depth=("num_layers",))


FULL: Dict[str, ModelSpec] = {
    "sd15": ModelSpec(
        name="sd15", cls="UNet2DConditionModel", config=_SD15_UNET, dtype="float16",
        family="unet",
        inputs=dict(batch=2, latent=(64, 64), channels=4, text_tokens=77, text_dim=768),
        description="SD1.5 UNet, 512x512 (latent 64x64), CFG batch 2, 77 text tokens",
        source="runwayml/stable-diffusion-v1-5 unet/config.json",
        attention="16 transformer blocks: self-attention over 4096/1024/256/64 tokens "
                  "(head dim 40/80/160/160, 8 heads) + cross-attention to 77 tokens"),
    "sdxl": ModelSpec(
        name="sdxl", cls="UNet2DConditionModel", config=_SDXL_UNET, dtype="float16",
        family="unet",
        inputs=dict(batch=2, latent=(128, 128), channels=4, text_tokens=77, text_dim=2048,
                    text_embeds_dim=1280, time_ids=(1024, 1024, 0, 0, 1024, 1024)),
        description="SDXL base UNet, 1024x1024 (latent 128x128), CFG batch 2, 77 text tokens",
        source="stabilityai/stable-diffusion-xl-base-1.0 unet/config.json",
        attention="70 transformer blocks: self-attention over 4096 tokens (10 heads x 64) and "
                  "1024 tokens (20 heads x 64) + cross-attention to 77 tokens"),
    "pixart": ModelSpec(
        name="pixart", cls="PixArtTransformer2DModel", config=_PIXART_SIGMA, dtype="float16",
        family="pixart",
        # an empty negative prompt is one T5 token (its end), a prompt a few dozen
        inputs=dict(batch=2, latent=(128, 128), channels=4, text_tokens=300,
                    text_valid=(1, 48), text_dim=4096),
        description="PixArt-Sigma, 1024x1024 (latent 128x128 -> 4096 patches), CFG batch 2, "
                    "300 text tokens of which 1 and 48 valid (the rest padding, masked)",
        source="PixArt-alpha/PixArt-Sigma-XL-2-1024-MS transformer/config.json",
        attention="28 blocks: self-attention over 4096 tokens + cross-attention to 300 masked "
                  "text tokens, 16 heads x 72",
        depth=("num_layers",)),
    "sd3": ModelSpec(
        name="sd3", cls="SD3Transformer2DModel", config=_SD3_MEDIUM, dtype="bfloat16",
        family="sd3",
        inputs=dict(batch=2, latent=(128, 128), channels=16, text_tokens=333, text_dim=4096,
                    pooled_dim=2048),
        description="SD3-medium, 1024x1024 (latent 128x128 -> 4096 patches), CFG batch 2, "
                    "333 text tokens (77 CLIP + 256 T5)",
        source="stabilityai/stable-diffusion-3-medium-diffusers transformer/config.json",
        attention="24 joint blocks: self-attention over 4096+333 = 4429 tokens, 24 heads x 64",
        depth=("num_layers",)),
    "sd35": ModelSpec(
        name="sd35", cls="SD3Transformer2DModel", config=_SD35_LARGE, dtype="bfloat16",
        family="sd3",
        inputs=dict(batch=2, latent=(128, 128), channels=16, text_tokens=333, text_dim=4096,
                    pooled_dim=2048),
        description="SD3.5-large, 1024x1024 (latent 128x128 -> 4096 patches), CFG batch 2, "
                    "333 text tokens (77 CLIP + 256 T5)",
        source="stabilityai/stable-diffusion-3.5-large transformer/config.json",
        attention="38 joint blocks: RMS-normalized Q and K, self-attention over 4096+333 = "
                  "4429 tokens, 38 heads x 64",
        depth=("num_layers",)),
    "auraflow": ModelSpec(
        name="auraflow", cls="AuraFlowTransformer2DModel", config=_AURAFLOW, dtype="float16",
        family="auraflow",
        inputs=dict(batch=2, latent=(128, 128), channels=4, text_tokens=256, text_dim=2048),
        description="AuraFlow v0.3, 1024x1024 (latent 128x128 -> 4096 patches), CFG batch 2, "
                    "256 text tokens (the pipeline's max_sequence_length)",
        source="fal/AuraFlow-v0.3 transformer/config.json",
        attention="4 joint + 32 single-stream blocks: self-attention over 8 register + 256 "
                  "text + 4096 image = 4360 tokens, 12 heads x 256",
        depth=("num_single_dit_layers", "num_mmdit_layers")),
    "flux1024": _flux("flux1024", 1024),
    "flux2048": _flux("flux2048", 2048),
    "flux2": _flux2("flux2", 1024),
    "qwenimage": _qwen_image("qwenimage", 1024),
    "qwenimage1328": _qwen_image("qwenimage1328", 1328),
    "zimage": ModelSpec(
        name="zimage", cls="ZImageTransformer2DModel", config=_Z_IMAGE_TURBO,
        dtype="bfloat16", family="zimage",
        inputs=dict(batch=1, latent=(128, 128), channels=16, text_tokens=128, text_dim=2560),
        description="Z-Image-Turbo, 1024x1024 (latent 128x128 -> 4096 patches), batch 1 "
                    "(guidance 0: no CFG), 128 caption tokens",
        source="Tongyi-MAI/Z-Image-Turbo transformer/config.json",
        attention="2 + 2 refiner blocks over the image's 4096 and the caption's 128 tokens, then "
                  "30 single-stream blocks over 4096+128 = 4224 tokens; RMS-normalized Q and "
                  "K, complex rotary embedding, 30 heads x 128",
        depth=("n_layers",)),
    "zimage_cfg": ModelSpec(
        name="zimage_cfg", cls="ZImageTransformer2DModel", config=_Z_IMAGE_TURBO,
        dtype="bfloat16", family="zimage",
        inputs=dict(batch=2, latent=(128, 128), channels=16, text_tokens=(128, 32),
                    text_dim=2560),
        description="Z-Image (the Turbo architecture) 1024x1024 with CFG: batch 2 of 128 and 32 "
                    "caption tokens, so the shorter row's padding is masked in every attention",
        source="Tongyi-MAI/Z-Image-Turbo transformer/config.json",
        attention="2 + 2 refiner blocks, then 30 single-stream blocks over 4096+128 tokens "
                  "(4096+32 valid in the second row, a key-padding mask), 30 heads x 128",
        depth=("n_layers",)),
    "wan": _wan("wan", _WAN21_13B, "1.3B", (832, 480), (60, 104)),
    "wan14b": _wan("wan14b", _WAN21_14B, "14B", (1280, 720), (90, 160)),
    "hunyuan": ModelSpec(
        name="hunyuan", cls="HunyuanVideoTransformer3DModel", config=_HUNYUAN_VIDEO,
        dtype="bfloat16", family="hunyuan",
        inputs=dict(batch=1, channels=16, frames=33, latent=(90, 160), text_tokens=256,
                    text_valid=64, text_dim=4096, pooled_dim=768, guidance=6.0),
        description="HunyuanVideo 1280x720 129 frames (latent 33x90x160 -> 118800 tokens), "
                    "batch 1 (guidance-distilled), 256 text tokens of which 64 valid (the "
                    "rest padding, masked)",
        source="hunyuanvideo-community/HunyuanVideo transformer/config.json",
        attention="20 double + 40 single blocks, joint self-attention over 118800+256 tokens "
                  "with the text padding masked, 24 heads x 128",
        depth=("num_layers", "num_single_layers")),
    "hunyuan15": ModelSpec(
        name="hunyuan15", cls="HunyuanVideo15Transformer3DModel", config=_HUNYUAN_VIDEO_15,
        dtype="bfloat16", family="hunyuan15",
        inputs=dict(batch=1, channels=32, frames=31, latent=(30, 53), text_tokens=1000,
                    text_valid=120, text_dim=3584, text2_tokens=256, text2_dim=1472,
                    image_tokens=729, image_dim=1152),
        description="HunyuanVideo-1.5 text-to-video, 848x480 121 frames (latent 31x30x53 -> "
                    "49290 tokens), batch 1 (one of the guider's two CFG calls), 1000 prompt "
                    "tokens of which 120 valid, 256 glyph and 729 image tokens all padding",
        source="hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v "
               "transformer/config.json",
        attention="54 blocks: joint self-attention over 49290 + 1985 tokens under a joint "
                  "padding mask (49410 valid), 16 heads x 128",
        depth=("num_layers",)),
    "ltx": ModelSpec(
        name="ltx", cls="LTXVideoTransformer3DModel", config=_LTX_VIDEO, dtype="bfloat16",
        family="ltx",
        inputs=dict(batch=2, channels=128, frames=21, latent=(16, 22), text_tokens=128,
                    text_valid=48, text_dim=4096, frame_rate=25),
        description="LTX-Video, 704x512 161 frames (latent 21x16x22 -> 7392 tokens), CFG "
                    "batch 2, 128 text tokens of which 48 valid (the rest padding, masked)",
        source="Lightricks/LTX-Video transformer/config.json",
        attention="28 blocks: self-attention over 7392 tokens + cross-attention to 128 masked "
                  "text tokens, 32 heads x 64",
        depth=("num_layers",)),
    "mochi": ModelSpec(
        name="mochi", cls="MochiTransformer3DModel", config=_MOCHI, dtype="bfloat16",
        family="mochi",
        inputs=dict(batch=2, channels=12, frames=15, latent=(60, 106), text_tokens=256,
                    text_valid=(1, 48), text_dim=4096),
        description="Mochi 1 preview, 848x480 85 frames (latent 15x60x106 -> 23850 tokens), "
                    "CFG batch 2, 256 text tokens of which 1 and 48 valid",
        source="genmo/mochi-1-preview transformer/config.json",
        attention="48 blocks: joint self-attention over 23850 video + each sample's valid text "
                  "tokens (one call per sample), 24 heads x 128",
        depth=("num_layers",)),
    "cogvideox": ModelSpec(
        name="cogvideox", cls="CogVideoXTransformer3DModel", config=_COGVIDEOX_2B,
        dtype="bfloat16", family="cogvideox",
        inputs=dict(batch=2, frames=13, channels=16, latent=(60, 90), text_tokens=226,
                    text_dim=4096),
        description="CogVideoX-2B, 720x480 49 frames (latent 13x60x90 -> 17550 tokens), "
                    "CFG batch 2, 226 text tokens",
        source="THUDM/CogVideoX-2b transformer/config.json",
        attention="30 blocks: joint self-attention over 17550+226 = 17776 tokens, 30 heads x 64",
        depth=("num_layers",)),
}


# ---- tiny versions for a CPU smoke test -------------------------------------------------------
# Head dims stay multiples of 8 (int8attn's constraint) so int8attn really runs.

def _tiny(spec: ModelSpec, config: Dict[str, Any], inputs: Dict[str, Any]) -> ModelSpec:
    return dataclasses.replace(spec, config=config, inputs=inputs, dtype="float32",
                               description="tiny " + spec.name + " (smoke test)",
                               source="tiny variant of " + spec.source,
                               attention="a few dozen tokens, head dim 16-32")


# Z-Image's tiny config for both inputs (the caption positions of zimage_cfg's 40 + 64 padded
# image tokens stay within the first axis' 128 rotary entries).
_TINY_Z_IMAGE = dict(
    all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=64, n_layers=2,
    n_refiner_layers=1, n_heads=2, n_kv_heads=2, qk_norm=True, cap_feat_dim=32,
    axes_dims=(8, 12, 12), axes_lens=(128, 32, 32))

TINY: Dict[str, ModelSpec] = {
    "sd15": _tiny(FULL["sd15"], dict(
        sample_size=16, in_channels=4, out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
        cross_attention_dim=32, attention_head_dim=2),
        dict(batch=2, latent=(16, 16), channels=4, text_tokens=8, text_dim=32)),
    "sdxl": _tiny(FULL["sdxl"], dict(
        sample_size=16, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        block_out_channels=(32, 64, 64), layers_per_block=1, norm_num_groups=8,
        cross_attention_dim=32, transformer_layers_per_block=(1, 1, 2),
        attention_head_dim=(2, 4, 4), use_linear_projection=True,
        addition_embed_type="text_time", addition_time_embed_dim=8,
        projection_class_embeddings_input_dim=32 + 6 * 8),
        dict(batch=2, latent=(16, 16), channels=4, text_tokens=8, text_dim=32,
             text_embeds_dim=32, time_ids=(128, 128, 0, 0, 128, 128))),
    "pixart": _tiny(FULL["pixart"], dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
        num_layers=2, norm_num_groups=8, cross_attention_dim=32, sample_size=24,
        norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
        interpolation_scale=1, use_additional_conditions=False, caption_channels=24),
        # 144 image tokens: its self-attention takes the quantized path (over 128 keys)
        dict(batch=2, latent=(24, 24), channels=4, text_tokens=12, text_valid=(1, 7),
             text_dim=24)),
    "sd3": _tiny(FULL["sd3"], dict(
        sample_size=16, patch_size=2, in_channels=4, out_channels=4, num_layers=2,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        caption_projection_dim=32, pooled_projection_dim=16, pos_embed_max_size=16),
        dict(batch=2, latent=(16, 16), channels=4, text_tokens=10, text_dim=32, pooled_dim=16)),
    "sd35": _tiny(FULL["sd35"], dict(
        sample_size=16, patch_size=2, in_channels=4, out_channels=4, num_layers=2,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        caption_projection_dim=32, pooled_projection_dim=16, pos_embed_max_size=16,
        qk_norm="rms_norm"),
        dict(batch=2, latent=(16, 16), channels=4, text_tokens=10, text_dim=32, pooled_dim=16)),
    "auraflow": _tiny(FULL["auraflow"], dict(
        sample_size=16, patch_size=2, in_channels=4, num_mmdit_layers=1, num_single_dit_layers=1,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        caption_projection_dim=32, out_channels=4, pos_embed_max_size=64),
        # 64 image + 8 register + 72 text tokens: over 128 keys (the quantized path)
        dict(batch=2, latent=(16, 16), channels=4, text_tokens=72, text_dim=32)),
    "flux1024": _tiny(FULL["flux1024"], dict(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=16,
        guidance_embeds=True, axes_dims_rope=(4, 6, 6)),
        dict(batch=1, side=8, channels=16, text_tokens=8, text_dim=32, pooled_dim=16,
             guidance=3.5)),
    "flux2048": _tiny(FULL["flux2048"], dict(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=16,
        guidance_embeds=True, axes_dims_rope=(4, 6, 6)),
        dict(batch=1, side=12, channels=16, text_tokens=8, text_dim=32, pooled_dim=16,
             guidance=3.5)),
    "flux2": _tiny(FULL["flux2"], dict(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, timestep_guidance_channels=16,
        axes_dims_rope=(4, 4, 4, 4)),
        dict(batch=1, side=12, channels=16, text_tokens=8, text_dim=32, guidance=4.0)),
    **{name: _tiny(FULL[name], dict(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=(4, 6, 6)),
        dict(batch=1, side=side, channels=16, text_tokens=8, text_dim=32))
       for name, side in (("qwenimage", 8), ("qwenimage1328", 10))},
    "zimage": _tiny(FULL["zimage"], _TINY_Z_IMAGE,
                    dict(batch=1, latent=(8, 8), channels=4, text_tokens=32, text_dim=32)),
    "zimage_cfg": _tiny(FULL["zimage_cfg"], _TINY_Z_IMAGE,
                        dict(batch=2, latent=(8, 8), channels=4, text_tokens=(40, 16),
                             text_dim=32)),
    **{name: _tiny(FULL[name], dict(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
        out_channels=4, text_dim=32, freq_dim=16, ffn_dim=64, num_layers=2,
        cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=64),
        dict(batch=2, channels=4, frames=3, latent=(8, 8), text_tokens=8, text_dim=32))
       for name in ("wan", "wan14b")},
    "hunyuan": _tiny(FULL["hunyuan"], dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1,
        qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=32, pooled_projection_dim=16,
        rope_axes_dim=(4, 6, 6)),
        dict(batch=1, channels=4, frames=3, latent=(8, 8), text_tokens=8, text_valid=5,
             text_dim=32, pooled_dim=16, guidance=6.0)),
    "hunyuan15": _tiny(FULL["hunyuan15"], dict(
        in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=1, num_refiner_layers=1, mlp_ratio=2.0, text_embed_dim=32,
        text_embed_2_dim=24, image_embed_dim=24, rope_axes_dim=(4, 6, 6), task_type="t2v"),
        # 128 video + 24 + 8 + 16 text and image tokens: 176 joint, over 128 keys
        dict(batch=1, channels=4, frames=2, latent=(8, 8), text_tokens=24, text_valid=10,
             text_dim=32, text2_tokens=8, text2_dim=24, image_tokens=16, image_dim=24)),
    "ltx": _tiny(FULL["ltx"], dict(
        in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
        cross_attention_dim=32, num_layers=2, caption_channels=32),
        dict(batch=2, channels=8, frames=2, latent=(4, 4), text_tokens=8, text_valid=5,
             text_dim=32, frame_rate=25)),
    "mochi": _tiny(FULL["mochi"], dict(
        patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2,
        pooled_projection_dim=16, in_channels=4, out_channels=None, qk_norm="rms_norm",
        text_embed_dim=32, time_embed_dim=4, activation_fn="swiglu", max_sequence_length=16),
        # 3 frames of 8 x 8 patches: 192 video tokens, over 128 keys (the quantized path)
        dict(batch=2, channels=4, frames=3, latent=(16, 16), text_tokens=16, text_valid=(1, 11),
             text_dim=32)),
    "cogvideox": _tiny(FULL["cogvideox"], dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
        time_embed_dim=16, text_embed_dim=32, num_layers=2, sample_width=8, sample_height=8,
        sample_frames=5, patch_size=2, max_text_seq_length=8),
        dict(batch=2, frames=2, channels=4, latent=(8, 8), text_tokens=8, text_dim=32)),
}

MODEL_NAMES = tuple(FULL)


# ---- one step's inputs ------------------------------------------------------------------------

def make_inputs(spec: ModelSpec, device: torch.device, seed: int = 0) -> Dict[str, Any]:
    """The keyword arguments of one denoiser call of a sampler step (fixed random tensors, the
    CFG batch stacked as pipelines do), plus ``return_dict=False``. Timesteps have the dtype the
    pipelines pass: int64 from the UNet and CogVideoX schedulers, float32 from the flow-matching
    ones (SD3, Flux as t/1000, Wan)."""
    gen = torch.Generator().manual_seed(seed)
    dtype = spec.torch_dtype
    s = spec.inputs
    b = s["batch"]

    def randn(*shape: int) -> torch.Tensor:
        # drawn on the CPU so every device sees the same numbers
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)

    # a tuple of text lengths: one per batch row (a list of [L, dim] tensors, Z-Image)
    lengths = s["text_tokens"]
    text = ([randn(n, s["text_dim"]) for n in lengths] if isinstance(lengths, tuple)
            else randn(b, lengths, s["text_dim"]))
    if spec.family == "unet":
        h, w = s["latent"]
        kw: Dict[str, Any] = dict(sample=randn(b, s["channels"], h, w),
                                  timestep=torch.full((b,), 500, device=device,
                                                      dtype=torch.long),
                                  encoder_hidden_states=text)
        if "text_embeds_dim" in s:  # SDXL's micro-conditioning
            time_ids = torch.tensor([list(s["time_ids"])] * b, device=device, dtype=dtype)
            kw["added_cond_kwargs"] = dict(text_embeds=randn(b, s["text_embeds_dim"]),
                                           time_ids=time_ids)
    elif spec.family == "pixart":
        h, w = s["latent"]
        # the pipeline's prompt masks (1 valid, 0 padding; one valid count per row), its
        # scheduler's int64 timesteps, and no micro-conditions (PixArt-Sigma)
        mask = torch.zeros(b, s["text_tokens"], device=device, dtype=torch.long)
        for row, valid in enumerate(s["text_valid"]):
            mask[row, :valid] = 1
        kw = dict(hidden_states=randn(b, s["channels"], h, w), encoder_hidden_states=text,
                  encoder_attention_mask=mask,
                  timestep=torch.full((b,), 500, device=device, dtype=torch.long),
                  added_cond_kwargs=dict(resolution=None, aspect_ratio=None))
    elif spec.family == "sd3":
        h, w = s["latent"]
        kw = dict(hidden_states=randn(b, s["channels"], h, w), encoder_hidden_states=text,
                  pooled_projections=randn(b, s["pooled_dim"]),
                  timestep=torch.full((b,), 500.0, device=device))
    elif spec.family == "auraflow":
        h, w = s["latent"]
        # the pipeline passes t / 1000 in the model's dtype
        kw = dict(hidden_states=randn(b, s["channels"], h, w), encoder_hidden_states=text,
                  timestep=torch.full((b,), 0.5, device=device, dtype=dtype))
    elif spec.family == "flux":
        side = s["side"]
        kw = dict(hidden_states=randn(b, side * side, s["channels"]),
                  encoder_hidden_states=text, pooled_projections=randn(b, s["pooled_dim"]),
                  # the pipeline passes t / 1000 and the guidance scale; the model scales both
                  timestep=torch.full((b,), 0.5, device=device),
                  guidance=torch.full((b,), s["guidance"], device=device, dtype=torch.float32),
                  img_ids=_flux_image_ids(side, device, dtype),
                  txt_ids=torch.zeros(s["text_tokens"], 3, device=device, dtype=dtype))
    elif spec.family == "flux2":
        side, n = s["side"], s["text_tokens"]
        # the pipeline's (T, H, W, L) position ids per batch row, t / 1000, the guidance scale
        one = torch.arange(1)
        img_ids = torch.cartesian_prod(one, torch.arange(side), torch.arange(side), one)
        txt_ids = torch.cartesian_prod(one, one, one, torch.arange(n))
        kw = dict(hidden_states=randn(b, side * side, s["channels"]),
                  encoder_hidden_states=text,
                  timestep=torch.full((b,), 0.5, device=device),
                  guidance=torch.full((b,), s["guidance"], device=device, dtype=torch.float32),
                  img_ids=img_ids.expand(b, -1, -1).to(device),
                  txt_ids=txt_ids.expand(b, -1, -1).to(device))
    elif spec.family == "qwenimage":
        side = s["side"]
        kw = dict(hidden_states=randn(b, side * side, s["channels"]),
                  encoder_hidden_states=text,
                  # the pipeline passes t / 1000, and no mask when no text token is padding
                  timestep=torch.full((b,), 0.5, device=device, dtype=dtype),
                  img_shapes=[[(1, side, side)]] * b)
    elif spec.family == "zimage":
        h, w = s["latent"]
        # lists of per-sample tensors: latents [C, frames=1, H, W], caption features [L, dim];
        # the pipeline passes t as (1000 - t) / 1000
        kw = dict(x=[randn(s["channels"], 1, h, w) for _ in range(b)], cap_feats=list(text),
                  t=torch.full((b,), 0.5, device=device, dtype=dtype))
    elif spec.family == "wan":
        h, w = s["latent"]
        kw = dict(hidden_states=randn(b, s["channels"], s["frames"], h, w),
                  timestep=torch.full((b,), 500.0, device=device),
                  encoder_hidden_states=text)
    elif spec.family == "hunyuan":
        h, w = s["latent"]
        mask = torch.zeros(b, s["text_tokens"], device=device, dtype=dtype)
        mask[:, :s["text_valid"]] = 1
        kw = dict(hidden_states=randn(b, s["channels"], s["frames"], h, w),
                  # the pipeline passes t in the latents' dtype and the guidance scale x 1000
                  timestep=torch.full((b,), 500.0, device=device, dtype=dtype),
                  encoder_hidden_states=text, encoder_attention_mask=mask,
                  pooled_projections=randn(b, s["pooled_dim"]),
                  guidance=torch.full((b,), s["guidance"] * 1000.0, device=device, dtype=dtype))
    elif spec.family == "hunyuan15":
        f, (h, w) = s["frames"], s["latent"]
        latents = randn(b, s["channels"], f, h, w)
        # the pipeline's input: latents, the (zero) condition latents and their mask channel;
        # the tokenizers' masks (the glyph text's all padding without quoted text); zero image
        # embeddings for text-to-video; t expanded in the transformer's dtype
        mask = torch.zeros(b, s["text_tokens"], device=device, dtype=torch.long)
        mask[:, :s["text_valid"]] = 1
        kw = dict(hidden_states=torch.cat([latents, torch.zeros_like(latents),
                                           torch.zeros_like(latents[:, :1])], dim=1),
                  timestep=torch.full((b,), 700.0, device=device, dtype=dtype),
                  encoder_hidden_states=text, encoder_attention_mask=mask,
                  encoder_hidden_states_2=randn(b, s["text2_tokens"], s["text2_dim"]),
                  encoder_attention_mask_2=torch.zeros(b, s["text2_tokens"], device=device,
                                                       dtype=torch.long),
                  image_embeds=torch.zeros(b, s["image_tokens"], s["image_dim"],
                                           device=device, dtype=dtype))
    elif spec.family == "ltx":
        f, (h, w) = s["frames"], s["latent"]
        mask = torch.zeros(b, s["text_tokens"], device=device, dtype=torch.bool)
        mask[:, :s["text_valid"]] = True
        # the pipeline passes packed latents [B, F*H*W, C], the flow-matching t (sigma * 1000),
        # and the VAE's compression over the frame rate and pixels as the rope's scale
        kw = dict(hidden_states=randn(b, f * h * w, s["channels"]), encoder_hidden_states=text,
                  timestep=torch.full((b,), 500.0, device=device), encoder_attention_mask=mask,
                  num_frames=f, height=h, width=w,
                  rope_interpolation_scale=(8 / s["frame_rate"], 32, 32))
    elif spec.family == "mochi":
        h, w = s["latent"]
        mask = torch.zeros(b, s["text_tokens"], device=device, dtype=torch.long)
        for row, valid in enumerate(s["text_valid"]):
            mask[row, :valid] = 1
        # the pipeline passes the flow-matching t in the latents' dtype
        kw = dict(hidden_states=randn(b, s["channels"], s["frames"], h, w),
                  encoder_hidden_states=text, encoder_attention_mask=mask,
                  timestep=torch.full((b,), 500.0, device=device, dtype=dtype))
    elif spec.family == "cogvideox":
        h, w = s["latent"]
        kw = dict(hidden_states=randn(b, s["frames"], s["channels"], h, w),
                  encoder_hidden_states=text,
                  timestep=torch.full((b,), 500, device=device, dtype=torch.long))
    else:  # pragma: no cover - table error
        raise ValueError(f"unknown family {spec.family!r}")
    kw["return_dict"] = False
    return kw


def _flux_image_ids(side: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Flux's packed-latent position ids: [side*side, 3] = (0, row, column), as the pipeline
    builds them."""
    ids = torch.zeros(side, side, 3)
    ids[..., 1] = torch.arange(side)[:, None]
    ids[..., 2] = torch.arange(side)[None, :]
    return ids.reshape(side * side, 3).to(device=device, dtype=dtype)
