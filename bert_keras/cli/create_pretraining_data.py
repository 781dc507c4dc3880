"""Build BERT pretraining TFRecords (masked LM + next sentence prediction) exactly as the original
create_pretraining_data.py (its instances, its masking budget min(P, max(1, round(len(tokens) *
masked_lm_prob))) with [CLS]/[SEP] counted), with the features run_pretraining.py reads. Shards are
written in parallel, atomically, and a rerun skips the ones already complete; other settings or a
changed corpus on the same prefix need --overwrite. Flags also accept the original script's
spellings (--max_seq_length, --random_seed).
"""

from bert_keras.cli.flag_arguments import add_option


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "create-pretraining-data",
        help=summary,
        description=__doc__,
    )
    parser.add_argument("--input", required=True,
                        help="text files: comma-separated names and globs (a directory is an error: give "
                             "'DIR/*.txt'), or tfds:NAME for a TFDS text dataset")
    parser.add_argument("--vocab", required=True, help="vocab.txt (must contain [MASK])")
    add_option(parser, "--output-prefix", "--output_prefix", required=True,
               help="shards are written as PREFIX-00000-of-0000N.tfrecord")
    parser.add_argument("--format", choices=["bert", "text", "lines"], default="bert",
                        help="bert: one sentence per line, blank line between documents (default); "
                             "text: prose, one document per file, sentences split by rule; "
                             "lines: one document per line")
    parser.add_argument("--cased", action="store_true", help="cased rules (do_lower_case=False)")
    add_option(parser, "--decode-errors", "--decode_errors", choices=["strict", "replace"], default="strict",
               help="bytes that are not UTF-8: stop with file and line (strict), or read them as "
                    "U+FFFD and report how many lines had them (replace)")
    add_option(parser, "--seq-length", "--max-seq-length", "--max_seq_length", type=int, default=128,
               help="tokens per example (default 128)")
    add_option(parser, "--max-predictions", "--max-predictions-per-seq", "--max_predictions_per_seq",
               type=int, default=20, help="masked positions per example (default 20)")
    add_option(parser, "--masked-lm-prob", "--masked_lm_prob", type=float, default=0.15)
    add_option(parser, "--short-seq-prob", "--short_seq_prob", type=float, default=0.1)
    add_option(parser, "--dupe-factor", "--dupe_factor", type=int, default=10,
               help="passes over the corpus, each with new masks")
    add_option(parser, "--whole-word-mask", "--whole_word_mask", action="store_true",
               help="mask whole words (a token and its ## pieces)")
    add_option(parser, "--seed", "--random-seed", "--random_seed", type=int, default=12345)
    add_option(parser, "--num-output-shards", "--num_output_shards", type=int, default=8,
               help="number of output files")
    add_option(parser, "--num-shards", "--num_shards", type=int, default=1, help="machines sharing the work")
    add_option(parser, "--shard-index", "--shard_index", type=int, default=0,
               help="this machine's index in [0, num_shards)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes writing shards (default: CPU count for a big corpus, else 1)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards under the prefix made with other settings or from a changed corpus")
    add_option(parser, "--tfds-split", "--tfds_split", default="train", help="split of a tfds: input")
    add_option(parser, "--tfds-text-field", "--tfds_text_field", default="text",
               help="text feature of a tfds: input")
    parser.set_defaults(func=run)


def run(args):
    import time

    from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data

    start = time.perf_counter()
    settings = PretrainingDataSettings(
        input=args.input, vocab_file=args.vocab, output_prefix=args.output_prefix,
        lowercase=not args.cased, format=args.format, decode_errors=args.decode_errors,
        max_seq_length=args.seq_length, max_predictions_per_seq=args.max_predictions,
        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob, dupe_factor=args.dupe_factor,
        whole_word_mask=args.whole_word_mask, seed=args.seed,
        num_output_shards=args.num_output_shards, num_shards=args.num_shards, shard_index=args.shard_index,
        tfds_split=args.tfds_split, tfds_text_field=args.tfds_text_field,
    )
    summary = write_pretraining_data(settings, workers=args.workers, overwrite=args.overwrite,
                                     log=lambda line: print(line, flush=True))
    print(f"{len(summary['written'])} shard(s) written, {len(summary['skipped'])} skipped, "
          f"{summary['instances']} instances in {time.perf_counter() - start:.1f}s")
    return 0
