"""A served embedder's requests and answers: texts in; each text's vector (its size, norm and
first values) out."""

import numpy as np

from serving.text_requests import text_request

INPUTS = ({"text"},)
OUTPUTS = ({"embedding"},)
TAKES_TEXTS = True
FLAGS = ()


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed."""
    return '"your text"', "your text"


def request_inputs(texts, *, text_b=(), **_):
    # An embedder's 'A ||| B' is one text, as `bert-keras embed` reads it; --text-b is refused
    return text_request(texts, text_b=text_b)


def answer_lines(outputs, i, **_):
    vector = np.asarray(outputs["embedding"][i], dtype=np.float32)
    head = ", ".join(f"{v:+.4f}" for v in vector[:6])
    return [f"  embedding: {vector.shape[-1]} dims, L2 norm {float(np.linalg.norm(vector)):.4f}: "
            f"[{head}{', ...' if vector.shape[-1] > 6 else ''}]"]
