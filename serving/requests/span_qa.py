"""A served SQuAD-style model's requests and answers: questions and their context(s) in; the
answer span (or none, for SQuAD v2.0) out."""

from serving.text_requests import TextRequestError, broadcast, text_of

INPUTS = ({"question", "context"},)
OUTPUTS = ({"answer", "start_char", "end_char", "score"},)
TAKES_TEXTS = False
FLAGS = (("--question", "Q", "SQuAD-style question"), ("--context", "C", "SQuAD passage"))


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed."""
    question, context = "Who lives there?", "John Smith lives in New York."
    return f'--question "{question}" --context "{context}"', {"question": question, "context": context}


def request_inputs(texts, *, question=(), context=(), **_):
    questions = list(question) or list(texts)
    if not questions or not context:
        raise TextRequestError("this model answers questions: give --question Q --context C")
    return {"question": questions, "context": broadcast(context, len(questions), "--context")}


def answer_lines(outputs, i, **_):
    score = float(outputs["score"][i])
    if "has_answer" in outputs and not bool(outputs["has_answer"][i]):
        return [f"  no answer in the context (score {score:.3f})"]
    return [f"  answer: {text_of(outputs['answer'][i])!r}  [{int(outputs['start_char'][i])}:"
            f"{int(outputs['end_char'][i])}]  score {score:.3f}"]
