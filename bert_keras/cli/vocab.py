"""`bert-keras vocab`: learn a WordPiece vocabulary from text files."""

import os
import shlex

from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "vocab",
        help=summary,
        description=(
            "Learn a WordPiece vocabulary from plain-text files (one sentence or document per "
            "line). Words are split exactly as the BERT tokenizer will split them; the "
            "reserved tokens come first ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4)."
        ),
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="text files or glob patterns")
    parser.add_argument("-o", "--output", required=True, help="where to write vocab.txt")
    parser.add_argument("--size", type=int, default=30522, help="target vocabulary size (default 30522)")
    parser.add_argument("--cased", action="store_true", help="keep case and accents (cased model)")
    parser.add_argument(
        "--reserved", nargs="*", default=None, metavar="TOKEN",
        help="extra reserved tokens after the five special ones (e.g. [unused0])",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--runner", default=None,
                        help="count the words on Apache Beam (pip install bert-keras[beam]): DirectRunner, "
                             "DataflowRunner, FlinkRunner, SparkRunner or PortableRunner; the same counts")
    parser.add_argument("--beam-option", action="append", default=[], dest="beam_options", metavar="OPTION",
                        help="a Beam pipeline option, repeatable: --beam-option=--direct_num_workers=4")
    parser.set_defaults(func=run)


def run(args):
    import glob

    from bert_keras.cli.output_files import check_output_file

    inputs = [path for pattern in args.inputs for path in (glob.glob(pattern) or [pattern])]
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs)
    from tqdm import tqdm

    from pipelines.tokenizer import RESERVED_TOKENS, build_vocabulary, write_vocabulary
    from pipelines.tokenizer.corpus_words import count_corpus_words

    counts = count_corpus_words(args.inputs, lowercase=not args.cased, runner=args.runner,
                                pipeline_args=args.beam_options,
                                progress=lambda: tqdm(desc="counting words", unit=" lines"))
    reserved = RESERVED_TOKENS + list(args.reserved or [])
    print(f"{sum(counts.values()):,} words, {len(counts):,} distinct; learning {args.size:,} pieces...")
    tokens = build_vocabulary(counts, vocab_size=args.size, reserved_tokens=reserved)
    write_vocabulary(tokens, args.output)
    print(f"wrote {len(tokens):,} tokens to {args.output}")
    if len(tokens) > args.size:
        print(f"note: more than --size {args.size:,}: every character of the corpus (and its ## form) is a "
              "token of its own, so that no word is [UNK]; a larger --size adds pieces of words")
    print(f'next: bert-keras tokenize --vocab {shlex.quote(args.output)} "some text"')
    return 0
