"""SD3's joint attention (diffusers' ``JointAttnProcessor2_0``) with int8attn inside.

diffusers' processor joins the image and text tokens of Q, K and V with ``torch.cat`` on
``[B, H, N, D]`` views of ``[B, N, H, D]`` memory. Such a concatenation reads 128-byte runs
(D=64 at 16 bits) with a gather kernel: at SD3 1024 px with CFG its three calls a layer took
~230 µs on an H100, 41% of the attention kernel's own time. Here the tokens are joined in
``[B, N, H, D]``, where each batch's rows are two contiguous blocks, and int8attn reads that
layout directly (NHD); the maths is the stock processor's, to the operation.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

import torch

from ._processors import Int8AttnProcessor, stock_sdpa_nhd


class Int8JointAttnProcessor:
    """Replaces ``JointAttnProcessor2_0`` (SD3, SD3.5): the same projections, norms and output
    split, the tokens joined in ``[B, N, H, D]``, the attention by ``config`` (mode, policy,
    routing and counters are the shared :class:`Int8AttnProcessor`'s). Like the stock
    processor it ignores ``attention_mask`` and uses the default scale 1/√D.

    Args:
        config: The shared :class:`Int8AttnProcessor` (``replace_attention_with_int8`` passes
            its own).
    """

    def __init__(self, config: Int8AttnProcessor) -> None:
        self.config = config

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None, *args: Any,
                 **kwargs: Any) -> Any:
        """Compute the joint attention block like ``JointAttnProcessor2_0``."""
        batch = hidden_states.shape[0]
        image_tokens = hidden_states.shape[1]
        heads = attn.heads
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        head_dim = key.shape[-1] // heads
        query = query.view(batch, -1, heads, head_dim)
        key = key.view(batch, -1, heads, head_dim)
        value = value.view(batch, -1, heads, head_dim)
        # The norms act on the last dimension (D), so [B, N, H, D] gives the stock values.
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if encoder_hidden_states is not None:
            text_query = attn.add_q_proj(encoder_hidden_states).view(batch, -1, heads, head_dim)
            text_key = attn.add_k_proj(encoder_hidden_states).view(batch, -1, heads, head_dim)
            text_value = attn.add_v_proj(encoder_hidden_states).view(batch, -1, heads, head_dim)
            if attn.norm_added_q is not None:
                text_query = attn.norm_added_q(text_query)
            if attn.norm_added_k is not None:
                text_key = attn.norm_added_k(text_key)
            query = torch.cat([query, text_query], dim=1)
            key = torch.cat([key, text_key], dim=1)
            value = torch.cat([value, text_value], dim=1)

        out = self.config.attention(query, key, value, layout="NHD",
                                    fallback_fn=lambda: stock_sdpa_nhd(query, key, value))
        hidden_states = out.reshape(batch, -1, heads * head_dim).to(query.dtype)
        if encoder_hidden_states is not None:
            hidden_states, encoder_hidden_states = (hidden_states[:, :image_tokens],
                                                    hidden_states[:, image_tokens:])
            if not attn.context_pre_only:
                encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        if encoder_hidden_states is not None:
            return hidden_states, encoder_hidden_states
        return hidden_states


# diffusers' Attention.forward inspects the processor's signature on every call (to filter
# keyword arguments): precomputed, that is a lookup (see Int8AttnProcessor's).
Int8JointAttnProcessor.__call__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    Int8JointAttnProcessor.__call__)
