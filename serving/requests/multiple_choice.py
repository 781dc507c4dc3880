"""A served multiple-choice model's requests and answers: one context and its endings in; the
chosen ending (with the endings' probabilities) out."""

from serving.text_requests import TextRequestError, probability_line

INPUTS = ({"context", "endings"},)
OUTPUTS = ({"choice"}, {"choice", "probabilities"})
TAKES_TEXTS = False
FLAGS = (("--context", "C", "multiple-choice context"), ("--ending", "E", "multiple-choice ending"))
_ENDINGS = ("He sits down.", "He eats the window.", "He flies away.", "He sings the chair.")


def example(signature_inputs, settings):
    """`(query arguments, REST instance)` of a request that works as printed: as many endings as
    the model has choices (the export's `num_choices` setting; else the `endings` input's width;
    else SWAG's 4). Fewer are refused ("expected 4 endings per row")."""
    shape = signature_inputs["endings"].get("shape") or [-1, -1]
    width = shape[-1] if len(shape) == 2 and shape[-1] and shape[-1] > 0 else None
    count = int(settings.get("num_choices") or width or 4)
    endings = [_ENDINGS[k % len(_ENDINGS)] for k in range(count)]
    context = "He enters the room."
    return (f'--context "{context}" ' + " ".join(f'--ending "{e}"' for e in endings),
            {"context": context, "endings": endings})


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
