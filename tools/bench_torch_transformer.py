#!/usr/bin/env python3
"""PyTorch's Transformer training throughput, the baseline for tools/bench_transformer.sh (issue 25,
section 6): torch.nn.Transformer(norm_first=True) with the sizes of scaletrain's transformer-base or
transformer-tiny, one embedding matrix shared by source, target and the pre-softmax projection
(scaled by sqrt(width)), sinusoidal positions, dropout 0.1, padding and causal masks, label-smoothed
cross-entropy (0.1, padding ignored) and Adam with the reference's betas (0.9, 0.997) and epsilon
1e-9: the graph and update scaletrain runs (docs/models.md). The batch is the one scaletrain's
length buckets make of sentences of one length: --sentences pairs of --length tokens a side.

  python3 tools/bench_torch_transformer.py --model transformer-base --sentences 124 --length 32 \
      --vocab 33708 --steps 20 --warmup 5 --device cpu --threads 2

Prints "torch MODEL on DEVICE: N tokens/s (...)", tokens being the batch's target tokens, as
scaletrain counts them. On the CPU it first prints which BLAS torch's matrix products loaded and
stops on the reference BLAS (tools/torch_blas.py).
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (width, heads, feed-forward, layers), as include/scaletrain/models/transformer.hpp sizes them.
SIZES = {
    "transformer": (1024, 16, 4096, 6),
    "transformer-base": (512, 8, 2048, 6),
    "transformer-tiny": (128, 4, 512, 2),
}
PAD = 0


class TiedTransformer(nn.Module):
    def __init__(self, vocab, width, heads, ff, layers):
        super().__init__()
        self.width = width
        self.embedding = nn.Embedding(vocab, width, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, std=width**-0.5)
        self.core = nn.Transformer(width, heads, layers, layers, ff, dropout=0.1, batch_first=True, norm_first=True)
        self.dropout = nn.Dropout(0.1)

    def embed(self, tokens):
        length = tokens.shape[1]
        position = torch.arange(length, dtype=torch.float32, device=tokens.device)[:, None]
        half = self.width // 2
        scale = torch.exp(-math.log(10000.0) / max(half - 1, 1) * torch.arange(half, device=tokens.device))
        signal = torch.cat([torch.sin(position * scale), torch.cos(position * scale)], dim=1)
        return self.dropout(self.embedding(tokens) * self.width**0.5 + signal)

    def forward(self, source, target_in):
        # The decoder's self-attention masks only the future, as the reference's (its padding comes last).
        causal = self.core.generate_square_subsequent_mask(target_in.shape[1]).to(source.device)
        out = self.core(self.embed(source), self.embed(target_in), tgt_mask=causal,
                        src_key_padding_mask=source == PAD,
                        memory_key_padding_mask=source == PAD)
        return out @ self.embedding.weight.t()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(SIZES), default="transformer-base")
    p.add_argument("--sentences", type=int, required=True, help="sentence pairs a step")
    p.add_argument("--length", type=int, required=True, help="tokens a sentence, end of sentence included")
    p.add_argument("--vocab", type=int, default=33708)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--window", type=int, default=5, help="steps a timing window (the rate is their median)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (CPU; 0: torch's default)")
    a = p.parse_args()
    if a.device == "cpu":
        from torch_blas import require_fast_blas

        require_fast_blas()
        if a.threads:
            torch.set_num_threads(a.threads)
    elif not torch.cuda.is_available():
        raise SystemExit("bench_torch_transformer: no GPU visible to PyTorch")
    else:
        torch.backends.cuda.matmul.allow_tf32 = False  # scaletrain's fp32 is plain fp32 (docs/architecture.md)
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    width, heads, ff, layers = SIZES[a.model]
    model = TiedTransformer(a.vocab, width, heads, ff, layers).to(a.device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.997), eps=1e-9)
    gen = torch.Generator().manual_seed(2)
    words = torch.randint(2, a.vocab, (a.sentences, a.length - 1), generator=gen)
    eos = torch.ones(a.sentences, 1, dtype=torch.long)
    source = torch.cat([words, eos], 1).to(a.device)
    target = source.clone()
    target_in = torch.cat([torch.zeros_like(target[:, :1]), target[:, :-1]], 1)  # shifted right, as ours
    tokens = int((target != PAD).sum())

    def step():
        logits = model(source, target_in)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), target.reshape(-1), ignore_index=PAD,
                               label_smoothing=0.1, reduction="sum") / tokens
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    rates = []
    for _ in range(max(1, a.steps // a.window)):
        start = time.perf_counter()
        for _ in range(a.window):
            step()
        sync()
        rates.append(tokens * a.window / (time.perf_counter() - start))
    print(f"torch {a.model} on {a.device} ({torch.get_num_threads()} threads): {statistics.median(rates):.1f} tokens/s "
          f"(median of {len(rates)} windows of {a.window} steps after {a.warmup} warm-up; {a.sentences} pairs of "
          f"{a.length} tokens, vocabulary {a.vocab}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
