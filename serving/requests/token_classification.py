"""A served tagger's (NER) requests and answers: texts in; entities with their character spans out."""

from serving.text_requests import text_of, text_request

INPUTS = ({"text"},)
OUTPUTS = ({"entity_text", "entity_label", "start_char", "end_char", "score"},)
TAKES_TEXTS = True
FLAGS = ()


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed."""
    return '"John Smith lives in New York."', "John Smith lives in New York."


def request_inputs(texts, *, text_b=(), sources=None, family_known=False, **_):
    return text_request(texts, text_b=text_b, sources=sources, pairs_refused=family_known)


def answer_json(answer, **_):
    """A row's JSON answer (`answer_rows`) with its entity outputs cut to its `num_entities`: a
    batch's rows are padded to the most entities of any row ("" and -1), which are no entities of
    this text."""
    count = answer.get("num_entities")
    if not isinstance(count, int):
        return answer
    per_entity = set().union(*OUTPUTS)
    return {name: value[:count] if name in per_entity and isinstance(value, list) else value
            for name, value in answer.items()}


def answer_lines(outputs, i, **_):
    def get(name):
        return outputs[name][i]

    count = int(get("num_entities")) if "num_entities" in outputs else len(get("entity_text"))
    return [f"  {text_of(get('entity_label')[j]):<6} {text_of(get('entity_text')[j])!r:<30} "
            f"[{int(get('start_char')[j])}:{int(get('end_char')[j])}]  score {float(get('score')[j]):.3f}"
            for j in range(count)] or ["  (no entities)"]
