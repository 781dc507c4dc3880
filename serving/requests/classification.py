"""A served classifier's (or regressor's) requests and answers: texts or sentence pairs in; a
label with its probabilities, or a score, out (`serving.requests` says what each name means)."""

import numpy as np

from serving.text_requests import PAIR_SEPARATOR, TextRequestError, broadcast, probability_line, text_of
from serving.text_requests import text_request

INPUTS = ({"text"}, {"text", "text_b"})
OUTPUTS = ({"label", "probabilities"}, {"score"})
TAKES_TEXTS = True
FLAGS = (("--text-b", "TEXT", "second sentence of a pair task (once per TEXT, or once for all)"),)


def request_inputs(texts, *, text_b=(), names, **_):
    if names == {"text", "text_b"}:
        pairs = [text.partition(PAIR_SEPARATOR) for text in texts]
        firsts = [a for a, _, _ in pairs]
        seconds = broadcast(text_b, len(firsts), "--text-b") if text_b else [
            b if separator else None for _, separator, b in pairs]
        if not firsts or any(b is None for b in seconds):
            raise TextRequestError("this model takes sentence pairs: give 'A ||| B' or TEXT --text-b B")
        return {"text": firsts, "text_b": seconds}
    return text_request(texts)


def answer_lines(outputs, i):
    if "probabilities" not in outputs:
        return [f"  score: {float(outputs['score'][i]):.4f}"]
    probabilities = outputs["probabilities"][i]
    class_id = int(outputs["class_id"][i]) if "class_id" in outputs else int(np.argmax(probabilities))
    return [f"  label: {text_of(outputs['label'][i])}  (p={float(probabilities[class_id]):.3f})",
            probability_line(probabilities)]
