"""`bert-keras vocab`: learn a WordPiece vocabulary from text files.

Thin: the flags are the fields of `pipelines.tokenizer.vocabulary_learning.VocabularyOptions`,
`learn_vocabulary` learns and writes; this module checks the output paths and prints.
"""

import shlex
import sys

from bert_keras.cli.flag_arguments import add_case_options, add_unicode_normalization_option
from pipelines.command_options import add_field_options, field_values


def register(subparsers, summary):
    from pipelines.tokenizer.vocabulary_learning import VocabularyOptions  # no TensorFlow: --help stays fast

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
    add_case_options(parser, cased_help="keep case and accents (cased model)",
                     no_cased_help="; default --no-cased: lowercase (uncased model, as BERT's uncased vocabularies)")
    add_field_options(parser, VocabularyOptions)  # --size, --reserved, ... --morpheme-suffixes
    add_unicode_normalization_option(parser, help=(
        "NFC: compose the corpus (Hangul written decomposed, NFD jamo, as macOS file systems give it) before "
        "learning, and record it in tokenizer_config.json, so that tokenize, create-pretraining-data, pretrain, "
        "finetune and export compose every text the same way. Default: none (text read as given, as the "
        "original BERT and HF)"))
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    # `bert-keras ... -- OPTION ...`: the words after `--` (bert_keras.cli.main.TRAILING_OPTIONS).
    parser.set_defaults(func=run, trailing_beam_options=[])


def run(args):
    from tqdm import tqdm

    from pipelines.tokenizer.vocabulary_learning import VocabularyOptions, learn_vocabulary

    _gather_beam_options(args)
    learned = learn_vocabulary(
        args.inputs, args.output, lowercase=not args.cased, strip_accents=args.strip_accents, overwrite=args.overwrite,
        unicode_normalization=args.unicode_normalization,
        # A bar on a terminal only: in a log file or a pipe, tqdm's redraws were lines of \r-joined text.
        progress=lambda: tqdm(desc="counting words", unit=" lines", disable=not sys.stderr.isatty()),
        log=print, **field_values(VocabularyOptions, args))
    print(f"wrote {len(learned.tokens):,} tokens to {learned.path} (rules in {learned.settings_path})")
    for note in learned.notes:
        print(f"note: {note}")
    next_step = f'next: bert-keras tokenize --vocab {shlex.quote(args.output)} "some text"'
    if args.pre_tokenizer and args.morpheme_suffixes:
        next_step += f"  # pre-tokenizer {args.pre_tokenizer}, morpheme suffixes: reads raw text as is"
    elif args.pre_tokenizer:  # its tokenizer_config.json records the analyzer, which the later steps follow
        next_step += (f"  # pre-tokenizer {args.pre_tokenizer}, morphemes as words: tokenize, finetune, pretrain, "
                      f"predict and evaluate split raw text with {args.pre_tokenizer} (an export's clients split it: "
                      f"bert-keras query --pre-tokenizer {args.pre_tokenizer})")
    print(next_step)
    return 0


def _gather_beam_options(args):
    """The Beam pipeline options: the words after `--`, as `create-pretraining-data` takes them, and
    those of the deprecated `--beam-option=OPTION` (said on stderr). Options without `--runner` run on
    DirectRunner, as `create-pretraining-data`'s do: the words were counted here, without them."""
    given = list(args.beam_options or ())
    if given:
        print("note: --beam-option is deprecated: Beam pipeline options go after '--', as with "
              f"create-pretraining-data: ... -- {shlex.join(given)}", file=sys.stderr)
    from bert_keras.cli.main import CommandError
    from pipelines.beam_runner import stray_beam_words

    stray = stray_beam_words(list(args.trailing_beam_options or ()))
    if stray:  # argparse's `--` ended the options: a file named '-x.txt' went after it
        raise CommandError(f"{stray[0]!r} after '--' is not a Beam option (they start with --); input files "
                           f"go before '--' (one whose name starts with '-' as ./{stray[0]})")
    args.beam_options = tuple(given + list(args.trailing_beam_options or ()))
    if args.beam_options and not args.runner:
        args.runner = "DirectRunner"
