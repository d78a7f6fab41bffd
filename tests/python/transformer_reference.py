"""The MLPerf Transformer in PyTorch, for the tests that compare ours with it (test_torch_transformer.py,
test_torch_beam_search.py): torch.nn.Transformer(norm_first=True, layer_norm_eps=1e-6, dropout 0)
plus what it lacks, the shared embedding scaled by sqrt(D) with padding rows zeroed, the
reference's position signal (all sines, then all cosines, timescales spaced by ln(1e4) / (D/2 - 1))
and logits = h E^T. Parameter names: "embedding.weight", and "transformer." + our checkpoint's
other names."""
import math

import torch
import torch.nn as nn


def position_signal(length, width):
    half = width // 2
    inc = math.log(1.0e4) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float64) * -inc)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


class Reference(nn.Module):
    def __init__(self, vocab, width, heads, inner, layers):
        super().__init__()
        self.vocab, self.width = vocab, width
        self.embedding = nn.Embedding(vocab, width)
        self.transformer = nn.Transformer(width, heads, layers, layers, inner, dropout=0.0, norm_first=True,
                                          layer_norm_eps=1e-6, batch_first=True)

    def embed(self, ids):
        e = self.embedding(ids) * math.sqrt(self.width) * (ids != 0).unsqueeze(-1)
        return e + position_signal(ids.shape[1], self.width).to(e.dtype)

    def forward(self, src, lengths, tgt_in):
        """Logits (N * Lt, V) of a padded batch; lengths: the source lengths."""
        pad = torch.arange(src.shape[1])[None, :] >= lengths[:, None]
        causal = torch.triu(torch.full((tgt_in.shape[1], tgt_in.shape[1]), float("-inf")), diagonal=1)
        h = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal.to(self.embedding.weight.dtype),
                             src_key_padding_mask=pad, memory_key_padding_mask=pad)
        return (h @ self.embedding.weight.t()).reshape(-1, self.vocab)

    def encode(self, src, length):
        """The encoder's output for one sentence (1, Ls) of `length` tokens, and its padding mask."""
        pad = torch.arange(src.shape[1])[None, :] >= length
        return self.transformer.encoder(self.embed(src), src_key_padding_mask=pad), pad

    def next_logits(self, memory, pad, ids):
        """ids [rows, t] (start id first); memory and pad of one sentence, tiled to the rows."""
        rows, t = ids.shape
        causal = torch.triu(torch.full((t, t), float("-inf"), dtype=torch.float64), diagonal=1)
        h = self.transformer.decoder(self.embed(ids), memory.expand(rows, -1, -1), tgt_mask=causal,
                                     memory_key_padding_mask=pad.expand(rows, -1))
        return (h[:, -1] @ self.embedding.weight.t()).numpy()
