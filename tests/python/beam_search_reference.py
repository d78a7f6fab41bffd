"""A numpy port of the MLPerf Transformer reference's beam search (mlcommons/training,
retired_benchmarks/transformer/tensorflow/transformer/model/beam_search.py, from Tensor2Tensor),
function for function, batched as the reference runs it, in float64: the oracle of
test_torch_beam_search.py. tf.nn.top_k is a stable sort (the lower index first among equal
values); the reference's cache is left out: symbols_to_logits_fn gets the whole alive sequences
(the start id first) and recomputes what the cache would hold.

    sequence_beam_search(symbols_to_logits_fn, batch_size, vocab_size, beam_size, alpha,
                         max_decode_length, eos_id) -> (seqs [batch, beam, length], scores [batch, beam])

It also records the smallest margin of any top-k decision it takes (the gap between the last value
kept and the first left out, among finite values), which says how far a float32 implementation may
stray before it decides otherwise."""
import numpy as np

INF = 1.0 * 1e7


class Margin:
    def __init__(self):
        self.smallest = np.inf

    def record(self, values, k):
        """values: [..., n], sorted in top_k order along the last axis."""
        if values.shape[-1] <= k:
            return
        kept, left = values[..., k - 1], values[..., k]
        finite = np.isfinite(kept) & np.isfinite(left) & (kept > -INF / 2) & (left > -INF / 2)
        if finite.any():
            self.smallest = min(self.smallest, float(np.min((kept - left)[finite])))


def top_k(values, k, margin=None):
    """tf.nn.top_k over the last axis: (values, indices), the lower index first among equals."""
    order = np.argsort(-values, axis=-1, kind="stable")
    sorted_values = np.take_along_axis(values, order, axis=-1)
    if margin is not None:
        margin.record(sorted_values, k)
    return sorted_values[..., :k], order[..., :k]


def length_normalization(alpha, length):
    return ((5.0 + float(length)) / 6.0) ** alpha


def log_prob_from_logits(logits):
    top = logits.max(axis=-1, keepdims=True)
    return logits - (top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))


def gather_beams(nested, beam_indices):
    """nested: arrays [batch, beam, ...]; beam_indices [batch, new_beam]."""
    batch_pos = np.arange(beam_indices.shape[0])[:, None]
    return [x[batch_pos, beam_indices] for x in nested]


def gather_topk_beams(nested, score_or_log_prob, beam_size, margin=None):
    _, indices = top_k(score_or_log_prob, beam_size, margin)
    return gather_beams(nested, indices)


class SequenceBeamSearch:
    def __init__(self, symbols_to_logits_fn, vocab_size, batch_size, beam_size, alpha, max_decode_length, eos_id):
        self.symbols_to_logits_fn = symbols_to_logits_fn
        self.vocab_size = vocab_size
        self.batch_size = batch_size
        self.beam_size = beam_size
        self.alpha = alpha
        self.max_decode_length = max_decode_length
        self.eos_id = eos_id
        self.margin = Margin()
        self.steps = 0

    def search(self, initial_ids):
        state = self._create_initial_state(initial_ids)
        while self._continue_search(state):
            state = self._search_step(state)
        self.steps = state["i"]
        any_finished = state["finished_flags"].any(axis=1)
        seq = np.where(any_finished[:, None, None], state["finished_seq"], state["alive_seq"])
        scores = np.where(any_finished[:, None], state["finished_scores"], state["alive_log_probs"])
        return seq, scores

    def _create_initial_state(self, initial_ids):
        b, k = self.batch_size, self.beam_size
        alive_seq = np.repeat(initial_ids[:, None], k, axis=1)[:, :, None].astype(np.int64)
        alive_log_probs = np.tile(np.array([[0.0] + [-np.inf] * (k - 1)]), (b, 1))
        return {
            "i": 0,
            "alive_seq": alive_seq,
            "alive_log_probs": alive_log_probs,
            "finished_seq": np.zeros_like(alive_seq),
            "finished_scores": np.ones((b, k)) * -INF,
            "finished_flags": np.zeros((b, k), dtype=bool),
        }

    def _continue_search(self, state):
        i = state["i"]
        not_at_max_decode_length = i < self.max_decode_length
        max_length_norm = length_normalization(self.alpha, self.max_decode_length)
        best_alive_scores = state["alive_log_probs"][:, 0] / max_length_norm
        finished_scores = state["finished_scores"] * state["finished_flags"].astype(np.float64)
        lowest_finished_scores = finished_scores.min(axis=1)
        finished_batches = state["finished_flags"].any(axis=1)
        lowest_finished_scores = lowest_finished_scores + (1.0 - finished_batches.astype(np.float64)) * -INF
        worst_finished_better = np.all(lowest_finished_scores > best_alive_scores)
        return not_at_max_decode_length and not worst_finished_better

    def _search_step(self, state):
        new_seq, new_log_probs = self._grow_alive_seq(state)
        alive_state = self._get_new_alive_state(new_seq, new_log_probs)
        finished_state = self._get_new_finished_state(state, new_seq, new_log_probs)
        new_state = {"i": state["i"] + 1}
        new_state.update(alive_state)
        new_state.update(finished_state)
        return new_state

    def _grow_alive_seq(self, state):
        b, k, v = self.batch_size, self.beam_size, self.vocab_size
        alive_seq, alive_log_probs = state["alive_seq"], state["alive_log_probs"]
        flat_ids = alive_seq.reshape(b * k, -1)
        logits = self.symbols_to_logits_fn(flat_ids, state["i"]).reshape(b, k, v)
        log_probs = log_prob_from_logits(logits) + alive_log_probs[:, :, None]
        topk_log_probs, topk_indices = top_k(log_probs.reshape(b, k * v), 2 * k, self.margin)
        topk_beam_indices = topk_indices // v
        (topk_seq,) = gather_beams([alive_seq], topk_beam_indices)
        topk_ids = (topk_indices % v)[:, :, None]
        return np.concatenate([topk_seq, topk_ids], axis=2), topk_log_probs

    def _get_new_alive_state(self, new_seq, new_log_probs):
        new_finished_flags = new_seq[:, :, -1] == self.eos_id
        new_log_probs = new_log_probs + new_finished_flags.astype(np.float64) * -INF
        top_alive_seq, top_alive_log_probs = gather_topk_beams([new_seq, new_log_probs], new_log_probs,
                                                               self.beam_size, self.margin)
        return {"alive_seq": top_alive_seq, "alive_log_probs": top_alive_log_probs}

    def _get_new_finished_state(self, state, new_seq, new_log_probs):
        i = state["i"]
        finished_seq = np.concatenate(
            [state["finished_seq"], np.zeros((self.batch_size, self.beam_size, 1), dtype=np.int64)], axis=2)
        length_norm = length_normalization(self.alpha, i + 1)
        new_scores = new_log_probs / length_norm
        new_finished_flags = new_seq[:, :, -1] == self.eos_id
        new_scores = new_scores + (1.0 - new_finished_flags.astype(np.float64)) * -INF
        finished_seq = np.concatenate([finished_seq, new_seq], axis=1)
        finished_scores = np.concatenate([state["finished_scores"], new_scores], axis=1)
        finished_flags = np.concatenate([state["finished_flags"], new_finished_flags], axis=1)
        top_seq, top_scores, top_flags = gather_topk_beams([finished_seq, finished_scores, finished_flags],
                                                           finished_scores, self.beam_size, self.margin)
        return {"finished_seq": top_seq, "finished_scores": top_scores, "finished_flags": top_flags}


def sequence_beam_search(symbols_to_logits_fn, batch_size, vocab_size, beam_size, alpha, max_decode_length, eos_id):
    """The reference's entry point with initial ids 0 (transformer.py's predict). Returns
    (seqs, scores, search): seqs [batch, beam, length] with the start id first."""
    search = SequenceBeamSearch(symbols_to_logits_fn, vocab_size, batch_size, beam_size, alpha, max_decode_length,
                                eos_id)
    seqs, scores = search.search(np.zeros(batch_size, dtype=np.int64))
    return seqs, scores, search


def trim(ids, eos_id=1):
    """translate.py's _trim_and_decode: the ids before the first EOS."""
    ids = list(ids)
    return ids[:ids.index(eos_id)] if eos_id in ids else ids
