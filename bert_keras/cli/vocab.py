"""`bert-keras vocab`: learn a WordPiece vocabulary from text files."""

import shlex

from bert_keras.cli.flag_arguments import add_case_options, beam_runner_imports
from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "vocab",
        help=summary,
        description=(
            "Learn a WordPiece vocabulary from plain-text files (one sentence or document per "
            "line). Words are split exactly as the BERT tokenizer will split them; the "
            "reserved tokens come first ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4). HF's "
            "tokenizer_config.json is written beside it (NAME.tokenizer_config.json for a NAME.txt "
            "vocabulary; do_lower_case, strip_accents): the later "
            "steps and HF read the text with the same rules."
        ),
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="text files or glob patterns")
    parser.add_argument("-o", "--output", required=True, help="where to write vocab.txt")
    parser.add_argument("--size", type=int, default=30522, help="target vocabulary size (default 30522)")
    add_case_options(parser, cased_help="keep case and accents (cased model)")
    parser.add_argument(
        "--reserved", nargs="*", default=None, metavar="TOKEN",
        help="extra reserved tokens after the five special ones (e.g. [unused0])",
    )
    parser.add_argument("--character-coverage", type=float, default=1.0, metavar="SHARE",
                        help="keep the most frequent characters covering this share of the text (SentencePiece's "
                             "option; default 1.0, every character); the others become [UNK]. Korean, Chinese and "
                             "Japanese corpora need fewer characters (0.9995, as SentencePiece), or their alphabet "
                             "fills the vocabulary")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--runner", default=None,
                        help="count the words on Apache Beam (pip install bert-keras[beam]): DirectRunner, "
                             "DataflowRunner, FlinkRunner, SparkRunner or PortableRunner; the same counts")
    parser.add_argument("--beam-option", action="append", default=[], dest="beam_options", metavar="OPTION",
                        help="a Beam pipeline option, repeatable: --beam-option=--direct_num_workers=4")
    # The names are pipelines.tokenizer.morphemes.PRE_TOKENIZERS (not imported here: --help loads no TensorFlow).
    parser.add_argument("--pre-tokenizer", default=None, metavar="NAME",
                        help="split Korean words into morphemes first, with this analyzer: kiwi "
                             '(pip install "bert-keras[korean]"). Alone, every morpheme is a word of its own: '
                             "for a model that reads text split by kiwi at training AND inference "
                             "(pipelines.tokenizer.morphemes.morpheme_splitter('kiwi').spaced). With "
                             "--morpheme-suffixes, a vocabulary for raw text. Not with --runner")
    parser.add_argument("--morpheme-suffixes", action="store_true",
                        help="with --pre-tokenizer: learn a word's later morphemes as ## pieces (\"오늘은\" -> "
                             "오늘 ##은), so the vocabulary reads RAW text in-graph (stock TF Serving, no analyzer "
                             "at inference); kiwi is needed only to learn it")
    parser.set_defaults(func=run)


def run(args):
    import glob

    from bert_keras.cli.output_files import check_output_file

    if args.pre_tokenizer and args.runner:
        raise CommandError("--pre-tokenizer splits morphemes on this machine; it does not run with --runner: "
                           "drop one of them")
    if args.morpheme_suffixes and not args.pre_tokenizer:
        raise CommandError("--morpheme-suffixes needs a morpheme analyzer: add --pre-tokenizer kiwi")
    inputs = [path for pattern in args.inputs for path in (glob.glob(pattern) or [pattern])]
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs)
    from pipelines.tokenizer.tokenizer_config import tokenizer_config_path, write_tokenizer_settings

    settings_file = tokenizer_config_path(args.output)
    check_output_file(settings_file, overwrite=args.overwrite, inputs=inputs, flag="--output's rules file")
    from tqdm import tqdm

    from pipelines.tokenizer import RESERVED_TOKENS, build_vocabulary, write_vocabulary
    from pipelines.tokenizer.corpus_words import count_corpus_words
    from pipelines.tokenizer.morphemes import MissingAnalyzerError

    try:
        with beam_runner_imports(args.runner or "DirectRunner"):
            counts = count_corpus_words(args.inputs, lowercase=not args.cased, strip_accents=args.strip_accents,
                                        runner=args.runner,
                                        pipeline_args=args.beam_options,
                                        progress=lambda: tqdm(desc="counting words", unit=" lines"),
                                        pre_tokenizer=args.pre_tokenizer, morpheme_suffixes=args.morpheme_suffixes)
    except MissingAnalyzerError as error:
        raise CommandError(str(error)) from None
    reserved = RESERVED_TOKENS + list(args.reserved or [])
    print(f"{sum(counts.values()):,} words, {len(counts):,} distinct; learning {args.size:,} pieces...")
    from pipelines.tokenizer.vocab import alphabet_share

    share = alphabet_share(counts, args.size, args.character_coverage)
    if share >= 0.5:
        print(f"note: the characters alone (each also as ##) take {share:.0%} of --size {args.size:,}, leaving "
              f"{'no' if share >= 1 else 'little'} room for pieces of words; a script with thousands of "
              "characters needs --character-coverage 0.9995 (rarer characters become [UNK]) or a larger --size")
    tokens = build_vocabulary(counts, vocab_size=args.size, reserved_tokens=reserved,
                              character_coverage=args.character_coverage)
    write_vocabulary(tokens, args.output)
    write_tokenizer_settings(args.output, lowercase=not args.cased, strip_accents=args.strip_accents)
    print(f"wrote {len(tokens):,} tokens to {args.output} (rules in {settings_file})")
    if len(tokens) > args.size:
        print(f"note: more than --size {args.size:,}: every character of the corpus (and its ## form) is a "
              "token of its own, so that no word is [UNK]; a larger --size adds pieces of words")
    next_step = f'next: bert-keras tokenize --vocab {shlex.quote(args.output)} "some text"'
    # No file records how a vocabulary was learned: the last line says which pre-tokenizer it needs.
    if args.pre_tokenizer and args.morpheme_suffixes:
        next_step += f"  # pre-tokenizer {args.pre_tokenizer}, morpheme suffixes: reads raw text as is"
    elif args.pre_tokenizer:
        next_step += (f"  # pre-tokenizer {args.pre_tokenizer}, morphemes as words: split the text with "
                      f"{args.pre_tokenizer} first (pipelines.tokenizer.morphemes.morpheme_splitter"
                      f"({args.pre_tokenizer!r}).spaced), at training and inference")
    print(next_step)
    return 0
