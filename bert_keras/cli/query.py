"""`bert-keras query`: send raw text to a running server (bert-keras serve or TF Serving), print the answer."""

import argparse
import sys

import numpy as np

from bert_keras.cli import json_output
from bert_keras.cli.main import CommandError
from bert_keras.cli.server_arguments import (PAIR_SEPARATOR, add_connection_arguments, add_input_arguments,
                                             build_inputs, make_client)



def register(subparsers, summary):
    parser = subparsers.add_parser(
        "query",
        help=summary,
        description=(
            "Query a served model over gRPC (default) or REST. The model's metadata says which inputs\n"
            "its signature takes (text, text + text_b, question + context, context + endings); the\n"
            "answer is printed per input: label + probabilities, entities with their character spans,\n"
            "the answer span, or the embedding's size."
        ),
        epilog=(
            "examples:\n"
            '  bert-keras query --model sentiment "great movie" "dull plot"\n'
            '  bert-keras query --model mrpc "The cat sat. ||| A cat was sitting."\n'
            '  bert-keras query --model squad --question "Who wrote it?" --context "It was written by Ann."\n'
            '  bert-keras query --address 127.0.0.1:8501 --rest --model ner "Ann lives in Paris." --json\n'
            '  bert-keras query --model swag --context "She opened the door." --ending "and left." --ending "and sang."'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help=f"texts (a sentence pair as 'A{PAIR_SEPARATOR}B', or use --text-b)")
    add_input_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object per input")
    parser.set_defaults(func=run)


def _text(value):
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _row_input(inputs, i):
    return {name: (_text(rows[i]) if isinstance(rows[i], (str, bytes)) else [_text(v) for v in rows[i]])
            for name, rows in inputs.items()}


def _json_ready(value):
    if isinstance(value, np.ndarray):
        return [_json_ready(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def format_row(outputs, i):
    """Readable lines for row `i` of a served model's outputs (the export contract's output names)."""
    def get(name):
        return outputs[name][i]

    lines = []
    if "entity_text" in outputs:
        count = int(get("num_entities")) if "num_entities" in outputs else len(get("entity_text"))
        if count == 0:
            lines.append("  (no entities)")
        for j in range(count):
            lines.append(f"  {_text(get('entity_label')[j]):<6} {_text(get('entity_text')[j])!r:<30} "
                         f"[{int(get('start_char')[j])}:{int(get('end_char')[j])}]  score {float(get('score')[j]):.3f}")
    elif "answer" in outputs:
        has_answer = bool(get("has_answer")) if "has_answer" in outputs else True
        if has_answer:
            lines.append(f"  answer: {_text(get('answer'))!r}  [{int(get('start_char'))}:{int(get('end_char'))}]"
                         f"  score {float(get('score')):.3f}")
        else:
            lines.append(f"  no answer in the context (score {float(get('score')):.3f})")
    elif "choice" in outputs:
        probabilities = get("probabilities") if "probabilities" in outputs else None
        choice = int(get("choice"))
        lines.append(f"  choice: ending {choice}" + (f"  (p={float(probabilities[choice]):.3f})"
                                                      if probabilities is not None else ""))
        if probabilities is not None:
            lines.append("  probabilities: " + "  ".join(f"[{k}] {float(p):.3f}" for k, p in enumerate(probabilities)))
    elif "label" in outputs and "probabilities" in outputs:
        probabilities = get("probabilities")
        class_id = int(get("class_id")) if "class_id" in outputs else int(np.argmax(probabilities))
        lines.append(f"  label: {_text(get('label'))}  (p={float(probabilities[class_id]):.3f})")
        lines.append("  probabilities: " + "  ".join(f"[{k}] {float(p):.3f}" for k, p in enumerate(probabilities)))
    elif "embedding" in outputs:
        vector = np.asarray(get("embedding"), dtype=np.float32)
        head = ", ".join(f"{v:+.4f}" for v in vector[:6])
        lines.append(f"  embedding: {vector.shape[-1]} dims, L2 norm {float(np.linalg.norm(vector)):.4f}: "
                     f"[{head}{', ...' if vector.shape[-1] > 6 else ''}]")
    elif "score" in outputs:
        lines.append(f"  score: {float(get('score')):.4f}")
    else:
        for name in sorted(outputs):
            value = _json_ready(outputs[name][i] if np.ndim(outputs[name]) else outputs[name])
            lines.append(f"  {name}: {json_output.dumps(value)[:200]}")
    return lines


def run(args):
    from serving.client import ServingClientError

    client, signature = make_client(args)
    with client:
        inputs = build_inputs(signature["inputs"], args)
        try:
            outputs = client.predict(inputs, signature_name=args.signature)
        except ServingClientError as error:
            raise CommandError(f"{error.code}: {error.message}") from None
    rows = len(next(iter(inputs.values())))
    for i in range(rows):
        shown = _row_input(inputs, i)
        if args.json:
            print(json_output.dumps({"input": shown, "outputs": {name: _json_ready(value[i] if np.ndim(value) else value)
                                                          for name, value in outputs.items()}},
                             ensure_ascii=False))
            continue
        print(" | ".join(f"{value!r}" if len(shown) == 1 else f"{name}={value!r}" for name, value in shown.items()))
        print("\n".join(format_row(outputs, i)))
    sys.stdout.flush()
    return 0
