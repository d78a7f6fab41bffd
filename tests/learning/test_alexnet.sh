#!/usr/bin/env bash
# Learning check of alexnet at its input size 224x224 on 2 ranks (issue 24; run_learning_check.sh).
# No batch norm: with PyTorch's default init the logits start tiny and momentum SGD at 0.01 stays at
# ln(K) for tens of steps; Adam at 5e-4 (no weight decay) leaves that plateau sooner; 8 images per rank: each step all-reduces
# 228 MB and updates 61 M parameters, which costs more than 2 or 4 images (0.3 samples/s at 2).
exec bash "$(dirname "$0")/run_learning_check.sh" alexnet 224 10 160 60 --batch-size 8 --epochs 20 --optimizer adam --base-lr 0.0005 --lr-schedule constant
