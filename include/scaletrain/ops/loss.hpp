// Softmax cross-entropy with label smoothing, identical to PyTorch's
// CrossEntropyLoss(label_smoothing=eps, reduction='mean'):
//   loss_i = (1 - eps) * (-log p_i[y_i]) + eps * mean_k(-log p_i[k]).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// logits: (N, K) f32; labels: (N) i32 in [0, K). Returns the mean loss over the batch.
// dlogits: (N, K), overwritten with grad_scale * d(mean loss)/d(logits); may be undefined (not
// computed). grad_scale is the weight of this loss in a sum of losses (an auxiliary head's,
// --aux-loss-weight): it scales the gradient, not the returned loss; 1 gives exactly the
// unscaled gradient. On a GPU the loss is copied back, so the call waits for the ops before it.
double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                             Tensor& dlogits, double grad_scale = 1.0);

// Token-level cross-entropy for sequence models (the Transformer), with the same per-row loss: the
// rows of logits (T, V) are tokens, labels (T) int32 in [0, V) or `ignore_index` (padding), which
// adds nothing to the loss and gets a zero gradient row, as PyTorch's cross_entropy(ignore_index=,
// label_smoothing=). Returns the loss summed over this call's real tokens and their count.
// dlogits: (T, V), overwritten with d(sum)/d(logits) / normaliser (may be undefined). With the real
// tokens of the global batch as the normaliser, the gradients the ranks all-reduce (sum) are those
// of the mean over every real token of the global batch, not a mean of the ranks' means. On a GPU
// the result is copied back, so the call waits for the ops before it.
struct TokenLoss {
  double sum = 0.0;
  int64_t tokens = 0;
};
TokenLoss token_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                              int32_t ignore_index, double normaliser, Tensor& dlogits);

// Number of rows whose largest logit (first on ties) is at the label; logits and labels as above
// (N may be 0). On a GPU the count is copied back, so the call waits as the loss does.
int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels);

}  // namespace scaletrain::ops
