"""`bert-keras predict`: labels + probabilities, NER entities, or SQuAD answers from a fine-tuned model."""

import sys

from bert_keras.cli import json_output
from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "predict",
        help=summary,
        description=(
            "Run a fine-tuned model directory (from `bert-keras finetune`) on new text: "
            "classification gives the label and the class probabilities, NER the entities "
            "with their words, SQuAD (--squad FILE.json) writes predictions.json and "
            "nbest_predictions.json (+ null_odds.json for v2.0) in the official format."
        ),
        epilog=('examples: bert-keras predict --model out/sentiment "I loved it." "Dreadful."\n'
                "          bert-keras predict --model out/squad --squad dev-v1.1.json --output out/pred"),
    )
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="texts; a sentence pair as 'A ||| B' (or A<TAB>B in --input); SWAG: "
                             "'context ||| ending1 ||| ending2 ||| ending3 ||| ending4'")
    parser.add_argument("--model", required=True, metavar="DIR", help="a finetune --output-dir")
    parser.add_argument("--input", metavar="FILE", help="one text per line ('-' = stdin)")
    parser.add_argument("--squad", metavar="FILE", help="SQuAD JSON file (span QA models)")
    parser.add_argument("--output", metavar="PATH",
                        help="JSONL file of predictions (SQuAD: the output directory)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--n-best-size", type=int, default=20, help="squad: n-best list length")
    parser.add_argument("--max-answer-length", type=int, default=30, help="squad: in tokens")
    parser.add_argument("--null-threshold", type=float, default=None,
                        help="squad v2.0: predict no answer when null_odds exceeds this (default: the "
                             "model's: the dev best threshold when it was scored, else 0.0)")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    parser.set_defaults(func=run)


def _read_texts(args):
    texts = list(args.texts)
    if args.input:
        stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
        with stream:
            texts += [line.rstrip("\n") for line in stream if line.strip()]
    result = []
    for text in texts:
        for separator in ("\t", " ||| "):
            if separator in text:
                a, b = text.split(separator, 1)
                result.append((a.strip(), b.strip()))
                break
        else:
            result.append(text)
    return result


def _context_and_endings(text):
    """A multiple-choice input: 'context ||| e1 ||| e2 ||| e3 ||| e4' (or tab-separated)."""
    if isinstance(text, tuple):  # _read_texts split off the context at the first separator
        context, rest = text
        parts = [context] + [p.strip() for p in rest.replace("\t", " ||| ").split(" ||| ")]
    else:
        parts = [p.strip() for p in text.replace("\t", " ||| ").split(" ||| ")]
    return parts[0], parts[1:]


def run(args):
    from bert_keras.cli.finetune import load_task
    from bert_keras.tasks import TaskInputError

    task = load_task(args.model)
    if task.kind == "squad":
        return _predict_squad(args, task)
    if args.squad:
        raise CommandError(f"--squad needs a SQuAD model; {args.model} is a {task.kind} model")
    texts = _read_texts(args)
    if not texts:
        raise CommandError("no text given: pass TEXT arguments or --input FILE")
    try:
        rows = _predict_rows(task, texts, args.batch_size)
    except TaskInputError as error:
        raise CommandError(str(error)) from None
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.writelines(json_output.dumps(row) + "\n" for row in rows)
    for row in rows:
        print(json_output.dumps(row) if args.json else _shown(task, row))
    if args.output:
        print(f"wrote {len(rows)} predictions to {args.output}")
    return 0


def _predict_rows(task, texts, batch_size):
    """One JSON-able row per input: the task's `predict` output, with its input."""
    if task.kind in ("classification", "regression"):
        pairs = {isinstance(t, tuple) for t in texts}
        if len(pairs) > 1:
            raise CommandError("mix of single texts and 'A ||| B' pairs")
        x = ([t[0] for t in texts], [t[1] for t in texts]) if pairs == {True} else texts
        outputs = task.predict(x, batch_size=batch_size)
        shown = [t if isinstance(t, str) else list(t) for t in texts]
        if task.kind == "regression":
            return [{"text": t, "score": float(v)} for t, v in zip(shown, outputs)]
        return [{"text": t, "label": task.labels[int(p.argmax())],
                 "probabilities": {name: float(v) for name, v in zip(task.labels, p)}}
                for t, p in zip(shown, outputs)]
    if task.kind == "ner":
        plain = [t if isinstance(t, str) else " ".join(t) for t in texts]
        return [dict(text=t, **r) for t, r in zip(plain, task.predict(plain, batch_size=batch_size))]
    if task.kind == "multiple_choice":
        items = [_context_and_endings(text) for text in texts]
        for number, (_, endings) in enumerate(items, 1):  # name the command-line input, not x[1][i]
            if len(endings) != task.num_choices:
                raise CommandError(f"input {number}: a SWAG model scores exactly {task.num_choices} endings, "
                                   f"got {len(endings)} ('context ||| ending ||| ending ...')")
        probabilities = task.predict(([c for c, _ in items], [e for _, e in items]), batch_size=batch_size)
        return [{"context": c, "endings": e, "choice": int(p.argmax()), "ending": e[int(p.argmax())],
                 "probabilities": [float(v) for v in p]} for (c, e), p in zip(items, probabilities)]
    if task.kind == "embedding":
        vectors = task.predict([t if isinstance(t, str) else " ".join(t) for t in texts],
                               batch_size=batch_size)
        return [{"text": t, "embedding": [float(v) for v in row]} for t, row in zip(texts, vectors)]
    raise CommandError(f"predict does not support {task.kind} models")


def _shown(task, row):
    if task.kind == "multiple_choice":
        probs = "  ".join(f"[{i}] {v:.3f}" for i, v in enumerate(row["probabilities"]))
        return f"{row['context']!r}\n  -> {row['ending']!r}   ({probs})"
    if task.kind == "ner":
        found = ", ".join(f"{e['text']} ({e['type']})" for e in row["entities"]) or "(none)"
        return f"{row['text']!r}\n  entities: {found}"
    if task.kind == "regression":
        return f"{row['score']:+.4f}  {row['text']!r}"
    if task.kind == "embedding":
        return f"{row['text']!r}: [{', '.join(f'{v:+.4f}' for v in row['embedding'][:6])}, ...]"
    probs = "  ".join(f"{k}={v:.3f}" for k, v in row["probabilities"].items())
    return f"{row['label']:<12} {probs}   {row['text']!r}"


def _predict_squad(args, task):
    from bert_keras.tasks.registry import TaskSpecError, write_squad_predictions

    if not args.squad:
        raise CommandError(f"{args.model} is a SQuAD model: pass --squad FILE.json")
    try:
        count, answered, paths = write_squad_predictions(
            task, args.squad, args.output or args.model, batch_size=args.batch_size,
            threshold=args.null_threshold, n_best_size=args.n_best_size,
            max_answer_length=args.max_answer_length)
    except TaskSpecError as error:
        raise CommandError(str(error)) from None
    print(f"{count} questions, {answered} answered; wrote " + ", ".join(sorted(paths.values())))
    print(f"next: bert-keras evaluate --model {args.model} --data {args.squad}")
    return 0
