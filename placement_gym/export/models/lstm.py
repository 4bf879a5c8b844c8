"""Unrolled LSTM models: the RNN language model and GNMT-style translation models of 2, 4 and 8 layers.

Every layer at every time step is its own cell of explicit ops (two Gemm, Add, Split, Sigmoid/Tanh,
Mul, Add), so a placer can put layers and steps on different devices, as the TensorFlow graphs of
Mirhoseini et al. (ICML 2017) and Spotlight (Gao et al., ICML 2018) allowed. Weights are shared across
time steps: the same graph input feeds every step's Gemm. States start at zero; the first step of a
layer therefore has no recurrent matmul and no forget-gate product (exactly what zeros would give).

Sizes. Mirhoseini et al. 2017 benchmark an RNNLM "made of many LSTM cells organized in a grid"
(Zaremba et al. 2014; Jozefowicz et al. 2016) and an attentional NMT (Bahdanau et al. 2015; Wu et al.
2016, GNMT), with hidden size 2048 for the RNNLM and 1024 for NMT and batch 64 as we recall the paper's
setup (not re-checked against its text here). The choices below are documented, not copied:
- `rnnlm`: 2 LSTM layers of 2048, embeddings of 2048, vocabulary 40,000, 20 unrolled steps, batch 64;
  a logits layer and a log-softmax at every step (the first half of the per-step cross-entropy).
- `gnmt4`: 4-layer encoder and 4-layer decoder of 1024 units (GNMT's width; Mirhoseini et al. 2018
  place NMT of 2, 4 and 8 layers), wordpiece vocabularies of 32,000 (GNMT's shared 32k wordpieces),
  source and target length 20, batch 128 (GNMT's per-replica batch). GNMT's wiring, simplified:
  unidirectional encoder (GNMT's bottom encoder layer is bidirectional), residual connections from
  the third layer up, additive attention queried by the bottom decoder layer and fed as extra input
  to every upper decoder layer, decoder layers initialised with the encoder's final states.
- `gnmt2`, `gnmt8`: the same construction with 2 and 8 layers in the encoder and in the decoder (the
  NMT sizes of Mirhoseini et al. 2018; 8 is GNMT's depth). With 2 layers there is no residual
  connection (residuals start at the third layer).
"""

from __future__ import annotations

import torch
from torch import nn


class LSTMCell(nn.Module):
    """One LSTM layer's cell: gates = W_x x + b + W_h h, split into i, f, g, o (Hochreiter & Schmidhuber)."""

    def __init__(self, d_in: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.input_proj = nn.Linear(d_in, 4 * hidden)
        self.recurrent_proj = nn.Linear(hidden, 4 * hidden, bias=False)

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        gates = self.input_proj(x)
        if state is not None:
            gates = gates + self.recurrent_proj(state[0])
        i, f, g, o = torch.split(gates, self.hidden, dim=1)
        new_c = torch.sigmoid(i) * torch.tanh(g)
        if state is not None:
            new_c = torch.sigmoid(f) * state[1] + new_c
        new_h = torch.sigmoid(o) * torch.tanh(new_c)
        return new_h, new_c


def stacked_step(
    cells: nn.ModuleList, x: torch.Tensor, states: list, residual_from: int | None = None
) -> torch.Tensor:
    """One time step through stacked LSTM ``cells``: layer k reads layer k-1's output (the first reads
    ``x``) and its state ``states[k]`` (None: zeros), which it replaces in place; from layer
    ``residual_from`` up (None: no layer) a layer's output adds its input. Returns the top layer's output."""
    for layer, cell in enumerate(cells):
        states[layer] = cell(x, states[layer])
        h = states[layer][0]
        x = h + x if residual_from is not None and layer >= residual_from else h
    return x


class RNNLM(nn.Module):
    """Token ids (batch, steps) -> one (batch, vocab) log-probability tensor per step."""

    def __init__(self, vocab: int = 40_000, hidden: int = 2048, layers: int = 2) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.cells = nn.ModuleList(LSTMCell(hidden, hidden) for _ in range(layers))
        self.logits = nn.Linear(hidden, vocab)

    def forward(self, token_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        states: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.cells)
        outputs = []
        for x in self.embedding(token_ids).unbind(1):
            x = stacked_step(self.cells, x, states)
            outputs.append(torch.log_softmax(self.logits(x), dim=-1))
        return tuple(outputs)


class AdditiveAttention(nn.Module):
    """Bahdanau attention: score_s = v . tanh(K enc_s + Q q); context = sum_s softmax(score)_s enc_s."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.key_proj = nn.Linear(hidden, hidden, bias=False)
        self.query_proj = nn.Linear(hidden, hidden)
        self.score = nn.Linear(hidden, 1, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """Project the encoder outputs once per sequence (batch, src, hidden)."""
        return self.key_proj(memory)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        energy = torch.tanh(keys + self.query_proj(query).unsqueeze(1))
        weights = torch.softmax(self.score(energy), dim=1)  # (batch, src, 1)
        return torch.matmul(weights.transpose(1, 2), memory).squeeze(1)


class GNMT(nn.Module):
    """Source and target ids (batch, length) -> one (batch, vocab) log-probability tensor per target step."""

    def __init__(self, src_vocab: int = 32_000, tgt_vocab: int = 32_000, hidden: int = 1024,
                 layers: int = 4, residual_from: int = 2) -> None:
        super().__init__()
        self.residual_from = residual_from
        self.src_embedding = nn.Embedding(src_vocab, hidden)
        self.tgt_embedding = nn.Embedding(tgt_vocab, hidden)
        self.encoder = nn.ModuleList(LSTMCell(hidden, hidden) for _ in range(layers))
        # Decoder layer 0 reads the target embedding; upper layers read [layer below ; attention context].
        self.decoder = nn.ModuleList(
            LSTMCell(hidden if layer == 0 else 2 * hidden, hidden) for layer in range(layers)
        )
        self.attention = AdditiveAttention(hidden)
        self.logits = nn.Linear(hidden, tgt_vocab)

    def _encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        states: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.encoder)
        top_outputs = []
        for x in self.src_embedding(src_ids).unbind(1):
            top_outputs.append(stacked_step(self.encoder, x, states, self.residual_from))
        return torch.stack(top_outputs, dim=1), states  # type: ignore[return-value]

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        memory, states = self._encode(src_ids)
        keys = self.attention.keys(memory)
        outputs = []
        for x in self.tgt_embedding(tgt_ids).unbind(1):
            context = None
            for layer, cell in enumerate(self.decoder):
                cell_input = x if context is None else torch.cat([x, context], dim=1)
                states[layer] = cell(cell_input, states[layer])
                h = states[layer][0]
                x = h + x if layer >= self.residual_from else h
                if layer == 0:
                    context = self.attention(h, keys, memory)
            outputs.append(torch.log_softmax(self.logits(x), dim=-1))
        return tuple(outputs)
