"""A served tagger's (NER) requests and answers: texts in; entities with their character spans out."""

from serving.text_requests import text_of, text_request

INPUTS = ({"text"},)
OUTPUTS = ({"entity_text", "entity_label", "start_char", "end_char", "score"},)
TAKES_TEXTS = True
FLAGS = ()


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed."""
    return '"John Smith lives in New York."', "John Smith lives in New York."


def request_inputs(texts, **_):
    return text_request(texts)


def answer_lines(outputs, i, **_):
    def get(name):
        return outputs[name][i]

    count = int(get("num_entities")) if "num_entities" in outputs else len(get("entity_text"))
    return [f"  {text_of(get('entity_label')[j]):<6} {text_of(get('entity_text')[j])!r:<30} "
            f"[{int(get('start_char')[j])}:{int(get('end_char')[j])}]  score {float(get('score')[j]):.3f}"
            for j in range(count)] or ["  (no entities)"]
