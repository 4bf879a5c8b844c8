"""Mixture-of-experts decoders: the Llama-style decoder of `placement_gym.export.models.llama` whose
feed-forward blocks are sparse mixtures of SwiGLU experts (Shazeer et al. 2017; GShard, Lepikhin et al.
2021; Switch, Fedus et al. 2022; Mixtral, Jiang et al. 2024: 8 experts, top-2).

Routing, as GShard dispatches it with static shapes: a router (a bias-free projection to one logit per
expert), a softmax, the top ``top_k`` experts of each token with their probabilities renormalised, and a
capacity of ``ceil(capacity_factor * top_k * tokens / experts)`` tokens per expert. Each token's choices
take slots in their experts' buffers in priority order (every token's first choice before any second
choice, tokens in order); a choice past its expert's capacity is dropped. A dispatch tensor (token, expert,
slot) gathers each expert's tokens with an Einsum, every expert is its own SwiGLU on its (capacity,
width) buffer (its own ops, placeable on its own device), and a combine tensor holding the routing
weights scatters the results back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from placement_gym.export.models.blocks import Projection
from placement_gym.export.models.llama import Llama, LlamaConfig, LlamaLayer, SwiGLU


@dataclass(frozen=True)
class MoEConfig:
    base: LlamaConfig
    experts: int
    top_k: int = 2
    capacity_factor: float = 1.25

    def capacity(self, tokens: int) -> int:
        return max(1, math.ceil(self.capacity_factor * self.top_k * tokens / self.experts))


class MixtureOfExperts(nn.Module):
    """Router, top-k dispatch to ``experts`` SwiGLU experts of capacity-bounded buffers, weighted combine."""

    def __init__(self, config: MoEConfig) -> None:
        super().__init__()
        if not 1 <= config.top_k <= config.experts:
            raise ValueError(f"top_k must be 1 to the {config.experts} experts, got {config.top_k}")
        self.config = config
        hidden = config.base.hidden
        self.router = Projection(hidden, config.experts)
        self.experts = nn.ModuleList(SwiGLU(hidden, config.base.ffn_width) for _ in range(config.experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        tokens, experts, top_k = batch * seq, self.config.experts, self.config.top_k
        capacity = self.config.capacity(tokens)
        flat = x.reshape(tokens, hidden)
        probabilities = torch.softmax(self.router(flat), dim=-1)
        weights, chosen = torch.topk(probabilities, top_k, dim=-1)  # (tokens, top_k)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        expert_ids = torch.arange(experts, device=x.device)
        choice = (chosen[..., None] == expert_ids).to(x.dtype)  # (tokens, top_k, experts)
        # Slot of each choice in its expert's buffer: choices counted in priority order (k major).
        ranked = choice.transpose(0, 1).reshape(top_k * tokens, experts)
        slot = (torch.cumsum(ranked, dim=0) * ranked - 1.0).reshape(top_k, tokens, experts).transpose(0, 1)
        slots = torch.arange(capacity, device=x.device, dtype=x.dtype)
        # (tokens, top_k, experts, capacity): all zero for a choice not made (-1) or past the capacity
        placed = (slot[..., None] == slots).to(x.dtype)
        dispatch = placed.sum(dim=1)
        combine = (placed * weights[:, :, None, None]).sum(dim=1)
        buffers = torch.einsum("tec,th->ech", dispatch, flat)
        outputs = torch.stack([expert(buffers[e]) for e, expert in enumerate(self.experts)])
        return torch.einsum("tec,ech->th", combine, outputs).reshape(batch, seq, hidden)


def moe_decoder(config: MoEConfig) -> Llama:
    """A Llama-style decoder whose every layer's feed-forward block is a `MixtureOfExperts`."""
    layers = [LlamaLayer(config.base, MixtureOfExperts(config)) for _ in range(config.base.layers)]
    return Llama(config.base, layers)
