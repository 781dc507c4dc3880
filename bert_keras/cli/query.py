"""`bert-keras query`: send raw text to a running server (bert-keras serve or TF Serving), print the answer."""

import argparse
import sys

from bert_keras import json_output
from bert_keras.cli.main import CommandError
from bert_keras.cli.server_arguments import add_connection_arguments, add_input_arguments, build_inputs, make_client

def register(subparsers, summary):
    parser = subparsers.add_parser(
        "query",
        help=summary,
        description=(
            "Query a served model over gRPC (default) or REST. The model's metadata says which inputs\n"
            "its signature takes (text, text + text_b, question + context, context + endings); the\n"
            "answer is printed per input: label + probabilities, entities with their character spans,\n"
            "the answer span, the chosen ending, or the embedding's size."
        ),
        epilog=(
            "examples:\n"
            '  bert-keras query --model-name sentiment "great movie" "dull plot"\n'
            '  bert-keras query --model-name mrpc "The cat sat. ||| A cat was sitting."\n'
            '  bert-keras query --model-name squad --question "Who wrote it?" --context "It was written by Ann."\n'
            '  bert-keras query --address 127.0.0.1:8501 --rest --model-name ner "Ann lives in Paris." --json\n'
            '  bert-keras query --model-name swag --context "She opened the door." --ending "She left." \\\n'
            '      --ending "She sang." --ending "She sat down." --ending "She closed it."\n'
            '  bert-keras query --model-name nsmc --pre-tokenizer kiwi "영화가 정말 재미있었어요"'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="texts (a sentence pair as 'A ||| B', or use --text-b)")
    add_input_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help='print one JSON object per input: {"input", "outputs"} (a classifier\'s '
                             'probabilities by class name, as predict --json writes them)')
    parser.set_defaults(func=run)


def run(args):
    from serving.client import ServingClientError
    from serving.text_requests import answer_context, answer_lines, answer_rows, restore_offsets, split_morphemes

    client, signature = make_client(args)
    with client:
        inputs = build_inputs(signature["inputs"], args, signature_outputs=signature.get("outputs"))
        sent, char_maps = split_morphemes(inputs, args.pre_tokenizer) if args.pre_tokenizer else (inputs, None)
        try:
            outputs = client.predict(sent, signature_name=args.signature)
        except ServingClientError as error:
            raise CommandError(f"{error.code}: {error.message}") from None
        if char_maps is not None:  # spans in the raw text, as shown
            outputs = restore_offsets(outputs, inputs, sent, char_maps)
        context = answer_context(client, args.signature)  # the class names
    for i, (shown, answer) in enumerate(answer_rows(inputs, outputs, **context)):
        if args.json:
            print(json_output.dumps({"input": shown, "outputs": answer}, ensure_ascii=False))
            continue
        print(" | ".join(f"{value!r}" if len(shown) == 1 else f"{name}={value!r}" for name, value in shown.items()))
        print("\n".join(answer_lines(outputs, i, **context)))
    sys.stdout.flush()
    return 0

