"""One flag name per concept across subcommands: the flag groups several commands add.

`tests/bert_keras/test_cli_flags.py` holds the table every subcommand follows (concept -> flag ->
subcommands; it parses each parser against it). Former spellings stay accepted, hidden
(`pipelines.command_options.add_option`), so scripts written against an older name do not break.
"""

import argparse

from pipelines.command_options import add_option, finite_float, positive_int, sequence_length

INIT_HELP = "hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras"


def add_encoder_options(parser, *, seq_length_help, seq_length_default=None, init_help=INIT_HELP, applies_to=""):
    """`--init SPEC` (required), `--vocab`, `--cased` and `--seq-length`: a command that runs an encoder.

    `init_help` None: the caller adds `--init` (among alternatives); `applies_to` ("--init: ")
    starts the help of `--vocab` and `--cased`.
    """
    if init_help:
        parser.add_argument("--init", required=True, metavar="SPEC", help=init_help)
    parser.add_argument("--vocab", help=f"{applies_to}vocab.txt, when the model has none beside it")
    add_case_options(parser, applies_to=applies_to)
    add_option(parser, "--seq-length", "--max-seq-length", type=sequence_length, default=seq_length_default,
               help=seq_length_help)


UNICODE_NORMALIZATION_HELP = ("NFC composes every text before tokenizing, in the exported graph too: Hangul "
                              "written decomposed (NFD jamo, as macOS file names and some web pages give it) reads "
                              "as [UNK] with a Korean vocabulary otherwise; saved with the model. Default: none "
                              "(text read as given, as the original BERT and HF)")


def add_unicode_normalization_option(parser, help=UNICODE_NORMALIZATION_HELP):
    """`--unicode-normalization NFC|none` (dest `unicode_normalization`, None when not given):
    `pipelines.BertTokenizer(unicode_normalization=)`."""
    parser.add_argument("--unicode-normalization", choices=["NFC", "none"], default=None,
                        type=lambda value: value.upper() if value.lower() == "nfc" else value.lower(),
                        help=help)


def refuse_tokenizer_flags(args):
    """`--init DIR` naming a fine-tuned model directory: it tokenizes as it was trained (its
    directory records how), so `--vocab`, `--cased` and `--strip-accents` are errors naming them."""
    from bert_keras.cli.main import CommandError
    from bert_keras.finetuned_model import is_finetuned_directory

    if not is_finetuned_directory(args.init):
        return
    given = [flag for flag, value in (("--vocab", args.vocab), ("--cased", args.cased),
                                      ("--strip-accents", args.strip_accents)) if value not in (None, False)]
    given += [flag for flag, value in (("--no-cased", args.cased), ("--no-strip-accents", args.strip_accents))
              if value is False]
    if given:
        raise CommandError(f"{', '.join(given)}: {args.init} is a fine-tuned model, which tokenizes as it "
                           "was trained (as its directory records); leave them out")


def refuse_other_normalization(given, record, directory, reads="it tokenizes as it was trained"):
    """`--unicode-normalization` (`given`: "NFC" / "none" / None) other than the one the fine-tuned model
    `record` (read from `directory`) was trained with: an error naming both, for every command that reads
    such a model (`tokenize --init DIR`, `export --model DIR`; `finetune --init DIR` refuses it in
    `check_same_tokenization`). NFC changes more than decomposed Hangul (CJK compatibility ideographs,
    U+F900-U+FAFF, become unified ones; U+212B ANGSTROM SIGN becomes Å), text the model was trained to read
    as it was; and a model trained on composed text reads decomposed Hangul as [UNK] without it."""
    from bert_keras.cli.main import CommandError
    from pipelines.tokenizer.composition import checked_unicode_normalization

    if given is None or checked_unicode_normalization(given) == record.unicode_normalization:
        return
    fix = ("compose the text first (unicodedata.normalize(\"NFC\", text)), or fine-tune again with "
           "--unicode-normalization NFC" if record.unicode_normalization is None else
           "leave the flag out: the model composes every text (NFC), as in training")
    raise CommandError(f"--unicode-normalization {given}: {directory} was fine-tuned with "
                       f"unicode_normalization={record.unicode_normalization or 'none'}, and {reads}; {fix}")


def add_window_options(parser, *, squad=False, default="a text is its first window", model_defaults=False):
    """`--max-length N` and `--stride N`: a long text read in windows, as `from_pretrained(max_length=,
    stride=)` in Python (classification, NER and embeddings); `squad`: the command also reads SQuAD,
    whose context windows `--stride` spaces too (`add_stride_option`); `default`: what the command
    does without `--max-length`, for its help; `model_defaults`: without them a fine-tuned model keeps
    its own settings (`export`)."""
    parser.add_argument("--max-length", type=positive_int, default=None, metavar="N",
                        help="word pieces of a text read, in overlapping windows of --seq-length; its "
                             "scores come from all of them (classification: the mean of the windows' "
                             f"logits). Default: {default}")
    add_stride_option(parser, windows=True, squad=squad, model_defaults=model_defaults)


def add_stride_option(parser, *, windows=True, squad=False, model_defaults=False):
    """`--stride N` (dest `stride`): word pieces between the starts of two windows, the one flag of
    every family that reads windows (`pipelines.windowing`): a long text's, with `--max-length`
    (`windows`), and SQuAD's context windows (`squad`: SpanQA's `stride`; `--doc-stride`,
    run_squad.py's name, is then a hidden alias; `model_defaults`: without it a fine-tuned model keeps
    its own)."""
    from bert_keras.families import SquadSettings

    own = "a fine-tuned model's own, else " if model_defaults else ""
    uses = ([f"a long text's, with --max-length (default: {own}half a window)"] if windows else []) + \
           ([f"a squad context's (default {own}{SquadSettings.stride})"] if squad else [])
    add_option(parser, "--stride", *(["--doc-stride"] if squad else []), type=positive_int, default=None,
               metavar="N", help=f"word pieces between the starts of two windows: {'; '.join(uses)}")


STRIP_ACCENTS_HELP = ("strip accents (NFD, drop combining marks); default: when lowercasing, as BERT's uncased "
                      "rules and HF's strip_accents. --no-strip-accents lowercases only, keeping Hangul syllables "
                      "and accented letters whole: Korean vocabularies need it")


def add_case_options(parser, *, applies_to="", cased_help=None,
                     no_cased_help="; --no-cased lowercases whatever the vocabulary looks like"):
    """`--cased / --no-cased` (dest `cased`: None, True or False) and `--strip-accents /
    --no-strip-accents` (dest `strip_accents`: None, True or False): how text is normalized before
    word pieces (`pipelines.BertTokenizer(lowercase=, strip_accents=)`; `given_lowercase(args)`).
    `no_cased_help`: what `--no-cased` adds (a command that learns the vocabulary has none to read)."""
    parser.add_argument("--cased", action=argparse.BooleanOptionalAction, default=None,
                        help=(cased_help or f"{applies_to}cased tokenization (no lowercasing or accent stripping)")
                        + no_cased_help)
    parser.add_argument("--strip-accents", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{applies_to}{STRIP_ACCENTS_HELP}")



def given_lowercase(args):
    """`lowercase=` of `--cased` / `--no-cased`: False, True, or None (neither: the checkpoint's rule)."""
    return None if args.cased is None else not args.cased


def add_null_threshold_option(parser, help):
    """`--null-threshold X` (SQuAD v2.0): a finite number (with NaN no comparison is true)."""
    parser.add_argument("--null-threshold", type=finite_float, default=None, metavar="X", help=help)


def check_null_threshold(args, task):
    """`--null-threshold` for a SQuAD v1.1 model (`version_2` False), refused before any work:
    that model answers every question, so the flag would change nothing."""
    from bert_keras.cli.main import CommandError

    if args.null_threshold is not None and task.settings.get("version_2") is False:
        raise CommandError(f"--null-threshold: {args.model} is a SQuAD v1.1 model, which answers every question; "
                           "only a v2.0 model has a null threshold")
