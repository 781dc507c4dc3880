"""`bert-keras`: one thin module per subcommand.

Each subcommand module exposes `register(subparsers)`, which adds its parser and
sets `func=run`. Heavy imports (TensorFlow, Keras) happen inside `run`, so that
`bert-keras --help` answers at once.
"""

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading

from bert_keras.interruptions import Terminated, interrupt_behind

# (module under bert_keras.cli, one-line summary) in the order `--help` lists them.
SUBCOMMANDS = [
    ("quickstart", "the whole workflow in ~6 min: weights, vocab, pretrain, fine-tune, export, serve, query"),
    ("info", "show versions, devices and the tested matrix"),
    ("vocab", "build a WordPiece vocabulary from text files"),
    ("tokenize", "tokenize text exactly as the original BERT, with offsets"),
    ("convert", "convert weights between HF, TF1 (Google), keras-hub and .keras"),
    ("create-pretraining-data", "write masked-LM + next-sentence TFRecords (google-research format)"),
    ("pretrain", "pretrain BERT (masked-LM + next-sentence) with model.fit; resumable"),
    ("finetune", "fine-tune on GLUE, CSV/TSV/JSONL, CoNLL-2003, SQuAD or SWAG and evaluate"),
    ("distill", "distil a fine-tuned model into a smaller, faster student of the same task"),
    ("evaluate", "evaluate a fine-tuned model: GLUE table, SQuAD EM/F1, entity P/R/F1, SWAG accuracy"),
    ("predict", "predict with a fine-tuned model (SQuAD: official predictions.json; SWAG: choices .jsonl)"),
    ("embed", "sentence embeddings: cosine similarities, .npy/.jsonl files, --query search"),
    ("attention", "visualise attention: interactive HTML head view + PNG heatmaps"),
    ("serve", "serve exported models with TF Serving's gRPC + REST APIs (batching, TLS, graceful drain)"),
    ("query", "send text to a served model (bert-keras serve or TF Serving) and print the answer"),
    ("loadtest", "load-test a TF Serving-compatible endpoint: QPS, p50/p95/p99 latency, errors"),
    ("deploy-kit", "write docker-compose + Kubernetes + models.config for the official TF Serving image"),
    ("export", "export a fine-tuned model as a TF Serving SavedModel (tokenizer in the graph)"),
]


# Commands whose words after `--` are Beam pipeline options, and the attribute that gets them.
TRAILING_OPTIONS = {"vocab": "trailing_beam_options"}

VERBOSE_HELP = "show TensorFlow's log lines and library warnings (quiet by default)"


class CommandError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


# The commands a rerun resumes.
RESUMABLE_COMMANDS = ("finetune", "pretrain", "distill", "create-pretraining-data")
TRAINING_COMMANDS = ("finetune", "pretrain", "distill")
# The commands SIGTERM stops as Ctrl-C does: the training ones, and those writing a file that an
# abrupt death would leave a half-written temporary of beside it (`attention`'s PNG, `embed --output`).
SIGTERM_INTERRUPTED_COMMANDS = TRAINING_COMMANDS + ("attention", "embed", "encode")


# How long a SIGTERM waits for the main thread to answer it before the process exits anyway.
SIGTERM_GRACE_SECONDS = 10.0


@contextlib.contextmanager
def sigterm_as_interrupt(command):
    """Within it, SIGTERM raises `Terminated` in a training command, or another of
    `SIGTERM_INTERRUPTED_COMMANDS` (Python's default: the process dies at once, status -15, without
    a word, leaving the temporary file of the atomic write it was in; the exception removes it). A
    second SIGTERM kills as usual; a handler someone else installed (a server's drain) is left alone.

    Python runs a signal handler only when the main thread gets back to Python code. A main thread
    waiting inside TensorFlow (a `tf.data` pipeline filling a shuffle buffer, or skipping the
    batches a resumed run trained on already; a long step) did not for minutes, and every SIGTERM
    (`timeout`'s, a scheduler's) was swallowed meanwhile. A thread woken by the signal (Python's
    wakeup fd) exits with 143 when the handler has not run within `SIGTERM_GRACE_SECONDS`: what a
    SIGKILL would do (the backups are atomic), with the message of a stop."""
    if command not in SIGTERM_INTERRUPTED_COMMANDS or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    answered = threading.Event()

    def terminate(signum, frame):
        answered.set()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    watcher = _UnansweredSigtermWatcher(answered, resumes=command in RESUMABLE_COMMANDS)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        watcher.close()


class _UnansweredSigtermWatcher:
    """A daemon thread that reads the signals Python's wakeup fd reports and ends the process
    (status 143) when a SIGTERM stays unanswered by the main thread. Inactive when another
    wakeup fd is in place (an event loop's): its owner reads the signals."""

    def __init__(self, answered, resumes=True):
        import socket

        self._answered = answered
        self._resumes = resumes
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)
        self._previous = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        if self._previous != -1:  # someone else's: give it back, stay inactive
            signal.set_wakeup_fd(self._previous)
            self._close_sockets()
            return
        _forget_wakeup_fd_in_forked_children()
        _FORK_HOOK.append(self)
        threading.Thread(target=self._watch, name="sigterm-watcher", daemon=True).start()

    def _watch(self):
        try:
            while True:
                received = self._reader.recv(64)
                if not received:
                    return
                if signal.SIGTERM in received and not self._answered.wait(SIGTERM_GRACE_SECONDS):
                    print("terminated (SIGTERM)" + ("; run the same command again to resume" if self._resumes else ""),
                          file=sys.stderr, flush=True)
                    os._exit(143)
        except OSError:  # closed by close()
            return

    def close(self):
        if self._previous == -1:
            _FORK_HOOK.remove(self)
            signal.set_wakeup_fd(-1)
            self._close_sockets()

    def _close_sockets(self):
        import socket

        try:
            self._reader.shutdown(socket.SHUT_RDWR)  # wakes the watcher's recv
        except OSError:
            pass
        self._reader.close()
        self._writer.close()


_FORK_HOOK = []  # [the fork hook, the active watcher (while one is)]


def _forget_wakeup_fd_in_forked_children():
    """A forked child inherits the wakeup fd and the socket: a SIGTERM to the child (a pool's
    terminate) would reach this process's watcher, which would then end the run. Registered once."""
    def forget():
        if not _FORK_HOOK[1:]:  # no watcher active in the parent: someone else's wakeup fd, if any
            return
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # forked from another thread: the child cannot set it (nor run handlers)
            pass

    if not _FORK_HOOK:
        os.register_at_fork(after_in_child=forget)
        _FORK_HOOK.append(forget)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, reading `-1e9` and `-1e-5` as negative numbers. Python before 3.12.8 takes
    only `-1` and `-0.5` for numbers: `--null-threshold -1e9` stopped with "expected one argument".
    The pattern is the one later Pythons use; no flag of ours starts with `-` and a digit.
    Subcommand parsers are of the parent's class, so all of them read it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    # The arguments being parsed (set by `parse_args`, read by a subcommand parser's `error`).
    _argv = ()

    def error(self, message):
        """argparse's usage error; "expected one argument" for a flag whose value starts with '-'
        (`--beam-option --direct_num_workers=4`) says how to pass one. A flag typed last, with no
        value after it (`tokenize --pair`), gets no such hint: no value starts with '-' there."""
        match = re.match(r"argument (--[\w-]+)(?:/\S+)?: expected one argument$", message)
        if match and not self._typed_last(match.group(1)):
            message += f"\nhint: a value that starts with '-' goes after '=': {match.group(1)}=VALUE"
        super().error(message)

    def _typed_last(self, flag):
        """Whether `flag` (or an abbreviation of it) is the last of the arguments being parsed."""
        argv = list(ArgumentParser._argv)
        if "--" in argv:
            argv = argv[:argv.index("--")]
        return bool(argv) and len(argv[-1]) >= 3 and flag.startswith(argv[-1])

    def parse_args(self, args=None, namespace=None):
        """argparse's, with a hint when the arguments it did not take are the files of an unquoted
        pattern the shell expanded (`--data out/*.tfrecord`), and the words after `--` of a command
        that takes them so (`TRAILING_OPTIONS`) set apart: argparse gave `vocab FILES ... --
        --direct_num_workers=4` to the files."""
        args = list(sys.argv[1:] if args is None else args)
        ArgumentParser._argv = tuple(args)
        trailing = None
        command = next((arg for arg in args if not arg.startswith("-")), None)
        if command in TRAILING_OPTIONS and "--" in args and args.index("--") > args.index(command):
            args, trailing = args[:args.index("--")], args[args.index("--") + 1:]
        parsed, extras = self.parse_known_args(args, namespace)
        if trailing is not None:
            setattr(parsed, TRAILING_OPTIONS[command], trailing)
        if extras:
            from bert_keras.error_hints import expanded_pattern_hint

            hint = expanded_pattern_hint(sys.argv[1:] if args is None else list(args), extras)
            self.error(f"unrecognized arguments: {' '.join(extras)}" + (f"\nhint: {hint}" if hint else ""))
        return parsed


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, except for a text that starts with "example": kept line for line, as written.

    argparse refills an epilog to the terminal's width: `example: bert-keras pretrain ... --vocab
    vocab.txt` then `--config mini ...` on the next line, two lines of which neither runs when copied.

    >>> text = "example: bert-keras pretrain --data 'out/*.tfrecord' --vocab vocab.txt --config mini"
    >>> HelpFormatter("bert-keras")._fill_text(text, 40, "") == text
    True
    """

    def _fill_text(self, text, width, indent):
        if text.startswith("example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser():
    parser = ArgumentParser(
        prog="bert-keras",
        description="BERT on Keras 3 + TensorFlow: vocabulary, tokenization, weights, and more.",
        epilog="Run `bert-keras COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in SUBCOMMANDS:
        module = importlib.import_module(f"bert_keras.cli.{name.replace('-', '_')}")
        module.register(sub, summary)
    # `bert-keras COMMAND ... --verbose` works too; SUPPRESS keeps a global `--verbose`.
    for subparser in {id(p): p for p in sub.choices.values()}.values():  # an alias shares its parser
        subparser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        if subparser.formatter_class is argparse.HelpFormatter:  # its examples as written, not refilled
            subparser.formatter_class = HelpFormatter
    return parser


def command_parser(parser, command):
    """The parser of subcommand `command` in `build_parser()`'s `parser`."""
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return subparsers.choices[command]


def asks_verbose(argv):
    """Whether `argv` holds `--verbose`, as argparse reads it: before `--`, possibly abbreviated
    (`--verb`; an ambiguous prefix stops argparse anyway). `"--verbose" in argv` missed `--verb`:
    the command was parsed as verbose, and TensorFlow's logs stayed silenced."""
    for arg in argv:
        if arg == "--":
            return False
        if len(arg) >= 3 and "--verbose".startswith(arg):
            return True
    return False


def main(argv=None):
    from pipelines import tensorflow_logs
    from pipelines.environment import MissingDependencyError

    # Before anything imports TensorFlow (its C++ log level is read when it loads), so
    # before the subcommand modules are imported to build the parser.
    tensorflow_logs.configure(verbose=asks_verbose(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        try:
            with sigterm_as_interrupt(args.command):
                return args.func(args) or 0
        except Exception as error:  # noqa: BLE001 (only the file system's errors are re-raised as such)
            from bert_keras.error_hints import file_system_error

            interrupt = interrupt_behind(error)
            if interrupt is not None:
                raise interrupt from None
            raise file_system_error(error) or error
    except (CommandError, OSError, ValueError, MissingDependencyError) as error:
        # Library errors (bad vocabulary, mismatched checkpoint, bad input file, an extra to
        # install) and the system's (permission denied, a file where a directory should be)
        # name the file and the problem: show the message, not a traceback.
        if os.environ.get("BERT_KERAS_DEBUG") == "1":
            raise
        from bert_keras.error_hints import hint_for, in_flag_terms

        shown = in_flag_terms(str(error), args, sys.argv[1:] if argv is None else list(argv),
                              parser=command_parser(parser, args.command))
        print(f"bert-keras {args.command}: error: {shown}", file=sys.stderr)
        hint = hint_for(error, args)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        print("(set BERT_KERAS_DEBUG=1 for the full traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        terminated = isinstance(interrupt, Terminated)
        resumes = args.command in RESUMABLE_COMMANDS
        saved = getattr(interrupt, "saved", None)  # after the model was saved (`finetuning_run.after_saving`)
        if saved is not None:  # the same command would refuse the directory that now holds it
            import shlex

            print(("terminated (SIGTERM)" if terminated else "interrupted") + f" after saving {saved}; its dev "
                  f"evaluation was cut short: bert-keras evaluate --model {shlex.quote(saved)}", file=sys.stderr)
            return 143 if terminated else 130
        print(("terminated (SIGTERM)" if terminated else "interrupted")
              + ("; run the same command again to resume" if resumes else ""), file=sys.stderr)
        return 143 if terminated else 130


if __name__ == "__main__":
    # `python -m bert_keras.cli.main` runs this file as `__main__`: call the imported module's
    # main so that subcommands raising `bert_keras.cli.main.CommandError` are caught as such.
    from bert_keras.cli.main import main as _imported_main

    sys.exit(_imported_main())
