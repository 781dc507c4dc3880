"""A served multiple-choice model's requests and answers: one context and its endings in; the
chosen ending (with the endings' probabilities) out."""

from serving.text_requests import TextRequestError, probability_line

INPUTS = ({"context", "endings"},)
OUTPUTS = ({"choice"}, {"choice", "probabilities"})
TAKES_TEXTS = False
FLAGS = (("--context", "C", "multiple-choice context"), ("--ending", "E", "multiple-choice ending"))


def request_inputs(texts, *, context=(), ending=(), **_):
    if len(context) != 1 or len(ending) < 2:
        raise TextRequestError("this model picks an ending: give one --context C and two or more --ending E")
    return {"context": list(context), "endings": [list(ending)]}


def answer_lines(outputs, i, **_):
    choice = int(outputs["choice"][i])
    if "probabilities" not in outputs:
        return [f"  choice: ending {choice}"]
    probabilities = outputs["probabilities"][i]
    return [f"  choice: ending {choice}  (p={float(probabilities[choice]):.3f})", probability_line(probabilities)]
