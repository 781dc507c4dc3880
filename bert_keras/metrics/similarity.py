"""Sentence similarity scored as STS benchmarks score it: cosine similarity of two sentences'
vectors, ranked against gold scores (Spearman's rho, `scipy.stats.spearmanr`).

Example:
    >>> import numpy as np
    >>> a = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    >>> b = np.array([[1.0, 0.1], [1.0, 1.0], [0.0, 1.0]])
    >>> cosine_similarities(a, b).round(3).tolist()
    [0.995, 0.707, 0.0]
    >>> round(similarity_spearman(a, b, gold=[5.0, 2.5, 0.0]), 6)
    1.0
"""

import numpy as np

from bert_keras.metrics.classification import spearman


def cosine_similarities(vectors_a, vectors_b):
    """Row-wise cosine similarity of two `[N, D]` arrays (a zero vector has similarity 0)."""
    a, b = (np.asarray(v, dtype=np.float64) for v in (vectors_a, vectors_b))
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"expected two [N, D] arrays of one shape, got {a.shape} and {b.shape}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.maximum(norms, 1e-12)


def similarity_spearman(vectors_a, vectors_b, gold):
    """Spearman's rho of the pairs' cosine similarities against their gold scores (in [-1, 1];
    reported x100 in STS tables).

    Args:
        vectors_a, vectors_b: `[N, D]` sentence vectors, row i of each the pair i.
        gold: the N gold similarity scores (KorSTS / STS-B: 0 to 5).
    """
    return spearman(list(gold), cosine_similarities(vectors_a, vectors_b).tolist())
