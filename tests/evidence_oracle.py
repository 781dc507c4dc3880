"""The long-text evidence rule written a second way, in NumPy with a loop per text, as the
oracle that `bert_keras.models.window_relevance.evidence_logits` (the one implementation, in
TensorFlow) is tested against."""

import numpy as np

from bert_keras.models.window_relevance import TYPICAL_SHARE


def evidence_logits_reference(logits, distances, threshold, starts, sentence_reading=None):
    """`evidence_logits`' rule in NumPy: `starts` each text's first window (windows in text
    order), `sentence_reading(far) -> (logits, distances, typical_share)` of numpy arrays."""
    ends = np.append(starts[1:], len(logits))
    rows, far = [], []
    for text, (start, end) in enumerate(zip(starts, ends)):
        near = distances[start:end] <= threshold
        if 2 * int(near.sum()) >= end - start:
            rows.append(logits[start:end][near].astype(np.float64).mean(axis=0))
        else:
            far.append(text)
            rows.append(logits[start + int(np.argmin(distances[start:end]))].astype(np.float64))
    if sentence_reading is not None and far:
        for text, row, distance, typical_share in zip(far, *sentence_reading(np.array(far, np.int64))):
            if typical_share >= TYPICAL_SHARE:
                rows[text] = logits[starts[text]:ends[text]].astype(np.float64).mean(axis=0)
            elif np.isfinite(distance):
                rows[text] = np.asarray(row, np.float64).reshape(np.shape(rows[text]))
    return np.stack(rows)
