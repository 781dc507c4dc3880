"""A served classifier's (or regressor's) requests and answers: texts or sentence pairs in; a
label with its probabilities, or a score, out (`serving.requests` says what each name means)."""

import numpy as np

from serving.text_requests import PAIR_SEPARATOR, TextRequestError, broadcast, named_text, probability_line, split_pairs
from serving.text_requests import text_of, text_request

INPUTS = ({"text"}, {"text", "text_b"})
OUTPUTS = ({"label", "probabilities"}, {"score"})
TAKES_TEXTS = True
FLAGS = (("--text-b", "TEXT", "second sentence of a pair task (once per TEXT, or once for all)"),)


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed."""
    if set(signature_inputs) == {"text", "text_b"}:
        return ('"The cat sat. ||| A cat was sitting."', {"text": "The cat sat.", "text_b": "A cat was sitting."})
    return '"your text"', "your text"


def sample_texts(signature_inputs, text, *, text_b=(), **_):
    """`[text]`, made a sentence pair for a pair signature given no --text-b: what a command sends
    when the user typed no TEXT (`loadtest`)."""
    if set(signature_inputs) == {"text", "text_b"} and not text_b:
        return [f"{text}{PAIR_SEPARATOR}A fast fox leaps over a sleepy dog."]
    return [text]


def request_inputs(texts, *, text_b=(), names, sources=None, family_known=False, **_):
    if names == {"text", "text_b"}:
        # Split at ' ||| ' or a tab, as `bert-keras predict` reads a pair model's texts: a TSV line
        # of `loadtest --input` ("A<tab>B") was refused as "this model takes sentence pairs".
        pairs = [pair if isinstance(pair, tuple) else (pair, None)
                 for pair in split_pairs(texts, exact=True, sources=sources)]
        firsts = [a for a, _ in pairs]
        seconds = broadcast(text_b, len(firsts), "--text-b") if text_b else [b for _, b in pairs]
        if not firsts or any(b is None for b in seconds):
            single = next((i for i, (_, b) in enumerate(pairs) if b is None), None)
            which = f"{named_text(single, texts[single], sources)}: one sentence, but " if single is not None else ""
            raise TextRequestError(f"{which}this model takes sentence pairs: give 'A ||| B' (or A and B "
                                   "separated by a tab) or TEXT --text-b B")
        return {"text": firsts, "text_b": seconds}
    # 'A ||| B' is refused as `predict` refuses it, where the outputs say this is a classifier (an
    # embedder's signature takes the same one text, and reads 'A ||| B' as one)
    return text_request(texts, text_b=text_b, sources=sources, pairs_refused=family_known,
                        pair_fix=", or query a model fine-tuned on sentence pairs")


CLASSIFY_METHOD = "tensorflow/serving/classify"  # TF Serving's Classify API (no TensorFlow import here)


def answer_context(client, signature_name, signature):
    """`{"class_names": [...]}`: the label of each `probabilities` column, in class-id order, or {}.

    `serving_default` answers one `label` (the argmax) and the probabilities as a bare row: a
    reader of `[0] 0.120  [1] 0.050  [2] 0.830` cannot tell which class is which. The export's
    Classify signature (`classification`) answers every label name in id order (its `classes`),
    so one Classify call of an empty example (a row with no token, answered like any other)
    names them. A server or signature without one (a regressor, another model) gets {}: the
    columns stay numbered."""
    if "probabilities" not in signature["outputs"]:
        return {}
    texts = [name for name, info in signature["inputs"].items() if info.get("dtype") == "DT_STRING"]
    classifiers = sorted((name != "classification", name) for name, other in client.metadata().items()
                         if other.get("method_name") == CLASSIFY_METHOD and "classes" in other.get("outputs", {}))
    if not texts or len(texts) != len(signature["inputs"]) or not classifiers:
        return {}
    from serving.client import ServerConnectionError, ServingClientError

    try:
        (classes,) = client.classify([dict.fromkeys(texts, "")], signature_name=classifiers[0][1])
    except (ServingClientError, ServerConnectionError, ValueError):  # e.g. other features: numbered columns
        return {}
    return {"class_names": [text_of(label) for label, _ in classes]}


def answer_json(answer, class_names=None):
    """A row's JSON answer (`answer_rows`) with its probabilities named by `class_names` (`answer_context`),
    `{"neg": 0.12, "pos": 0.88}` as `bert-keras predict --json` writes them; numbered (a list) when
    no names are known."""
    probabilities = answer.get("probabilities")
    if class_names is None or not isinstance(probabilities, list) or len(probabilities) != len(class_names):
        return answer
    return {**answer, "probabilities": dict(zip(class_names, probabilities))}


def answer_lines(outputs, i, class_names=None):
    """Row `i`'s label and its probabilities (named by `class_names`, `answer_context`), or its score."""
    if "probabilities" not in outputs:
        return [f"  score: {float(outputs['score'][i]):.4f}"]
    probabilities = outputs["probabilities"][i]
    class_id = int(outputs["class_id"][i]) if "class_id" in outputs else int(np.argmax(probabilities))
    return [f"  label: {text_of(outputs['label'][i])}  (p={float(probabilities[class_id]):.3f})",
            probability_line(probabilities, class_names)]
