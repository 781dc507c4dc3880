"""What a request costs the model when its signature reads long texts in windows.

A signature exported with `max_length` past one window (`pipelines.windowing`) turns each text
into up to `1 + ceil((pieces - window) / stride)` windows inside the graph, and the windows
are the model's real batch. Batching such requests by their rows would put 32 long documents
(thousands of windows) into one call as readily as 32 short texts. The scheduler batches by
this cost instead (`BatchScheduler.submit(..., cost=)`): `max_batch_size` counts windows.

The cost is an estimate made before the model runs, from each text's UTF-8 length, so the
server never tokenizes twice: `BYTES_PER_PIECE` bytes per word piece (English WordPiece
averages 4-5 characters per piece; a lower figure over-counts, which only closes batches
early), capped by the export's `max_length` (pieces read at all) and its
`max_length * chars_per_token` cut. The export's settings are read from the loaded graph
(`window_settings`, a function the exporter saves with the SavedModel), so a missing or
half-copied file cannot lift the limit; an older export without it falls back to its model card
(`assets.extra/model_card.json`). A SavedModel that does not read windows costs its rows, as in
TF Serving; one whose settings cannot be read at all costs its rows too (one window per text,
the conservative reading), logged once when it loads.

An extractive QA export (`serving.signatures.span_qa`) reads each question's context in windows
too, up to its `max_windows`: `QuestionContextCost` counts them from the question and the
context (`question_context_settings` in its graph, else its model card).

The request limit (`--max-windows-per-request`) is checked on an upper bound instead
(`windows(..., bound=True)`): every byte that is not whitespace may be a word piece of its own
(commas, rare letter runs and Hangul's jamo are a piece per byte or nearly; whitespace never
is), so no text reads more windows than it was charged, whatever it holds.

Example:
    >>> import numpy as np
    >>> cost = WindowCost(window=126, stride=63, max_length=4096)
    >>> cost.windows(np.array([b"short text", b"word " * 600]))
    array([ 1, 11])
    >>> cost.windows(np.array([b"short text", b"word " * 600, b"," * 800]), bound=True)
    array([ 1, 38, 12])
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np

log = logging.getLogger(__name__)

BYTES_PER_PIECE = 4
_WHITESPACE = (b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c")


@dataclasses.dataclass(frozen=True)
class WindowCost:
    """The windows a batch of texts becomes.

    Args:
        window: word pieces per window (`seq_length - 2`).
        stride: word pieces between window starts.
        max_length: word pieces of a text read at all.
    """

    window: int
    stride: int
    max_length: int

    @classmethod
    def of_loaded(cls, loaded, path: str) -> WindowCost | None:
        """The cost of a loaded export (`tf.saved_model.load(path)`): its graph's `window_settings`,
        else its model card; None when it reads no windows (rows count)."""
        settings = getattr(loaded, "window_settings", None)
        if settings is not None:
            try:
                window, stride, max_length = (int(v) for v in settings().numpy())
            except Exception:  # noqa: BLE001 - an odd SavedModel attribute of that name: not ours
                pass
            else:
                return cls(window, stride, max_length) if max_length > window > 0 else None
        cost = cls.of_export(path)
        if cost is None and os.path.isdir(os.path.join(path, "assets.extra")) and not _card_readable(path):
            log.warning("%s: its window settings are neither in its graph nor in a readable "
                        "assets.extra/model_card.json: each text counts as one window against "
                        "--max-windows-per-request (export the version again to bound long texts)", path)
        return cost

    @classmethod
    def of_export(cls, path: str) -> WindowCost | None:
        """The cost of the export at `path` (a version directory), or None (rows count)."""
        from pipelines.windowing import window_options

        card_path = os.path.join(path, "assets.extra", "model_card.json")
        try:
            with open(card_path, encoding="utf-8") as f:
                card = json.load(f)
            settings = card["task"]["task_json"]["settings"] or {}  # the fine-tuned model's record
            seq_length = int(card["seq_length"])
            if settings.get("text_pair") or settings.get("max_length") is None:
                return None
            window, stride, max_length = window_options(seq_length, int(settings["max_length"]),
                                                        settings.get("stride"))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # not one of our exports, or an older card: rows count
        return cls(window, stride, max_length) if max_length > window else None

    def windows(self, texts: np.ndarray, bound: bool = False) -> np.ndarray:
        """Windows of each text (int64, at least 1): estimated, or (`bound`) at most."""
        pieces = np.minimum(_pieces(texts, bound), self.max_length)
        step = min(self.window, self.stride)
        return 1 + -(-np.maximum(pieces - self.window, 0) // step)

    def row_windows(self, arrays: dict, bound: bool = False) -> np.ndarray:
        """The windows of each row of a request (its one string input's texts)."""
        return self.windows(next(a for a in arrays.values() if a.dtype.kind in "OSU"), bound=bound)

    def cost(self, arrays: dict, bound: bool = False) -> int | None:
        """The windows of a request (estimated, or at most): its one string input's texts (None
        when it has none)."""
        texts = [a for a in arrays.values() if a.dtype.kind in "OSU"]
        if len(texts) != 1:
            return None
        return int(self.windows(texts[0], bound=bound).sum())


@dataclasses.dataclass(frozen=True)
class QuestionContextCost:
    """The windows of an extractive QA request (`serving.signatures.span_qa`): each question's
    context is read in windows of `seq_length - len(question) - 3` pieces, `stride` apart, at
    most `max_windows` of them (`pipelines.windowing.question_context_layout`).

    Without it a SpanQA request cost its rows: 1,024 questions of long contexts ran 16,384
    windows of 384 positions (minutes of CPU) past `--max-windows-per-request`, and went into a
    batch as if they were 1,024 short texts. The estimate and the bound read the question and
    the context as `WindowCost.windows` reads a text (bytes per piece; every byte that is not
    whitespace a piece at most); a longer question leaves less room, so the bound takes the
    question's own bound, cut at `max_query_length`.

    Example:
        >>> import numpy as np
        >>> cost = QuestionContextCost(seq_length=64, max_query_length=16, stride=32, max_windows=4)
        >>> arrays = {"question": np.array([b"who?", b"q" * 40], dtype=object),
        ...           "context": np.array([b"short", b"c" * 1000], dtype=object)}
        >>> cost.row_windows(arrays, bound=True).tolist()  # 1000 pieces: capped at 4 windows
        [1, 4]
        >>> cost.cost(arrays, bound=True)
        5

    Args:
        seq_length: positions of a window (`[CLS] question [SEP] context [SEP]`).
        max_query_length: question pieces read at most.
        stride: context pieces between window starts.
        max_windows: windows read per question at most.
    """

    seq_length: int
    max_query_length: int
    stride: int
    max_windows: int

    @classmethod
    def of_loaded(cls, loaded, path: str) -> QuestionContextCost | None:
        """The cost of a loaded SpanQA export (its graph's `question_context_settings`, else
        its model card's settings), or None: not a SpanQA export."""
        settings = getattr(loaded, "question_context_settings", None)
        values = None
        if settings is not None:
            try:
                values = [int(v) for v in settings().numpy()]
            except Exception:  # noqa: BLE001 - an odd SavedModel attribute of that name: not ours
                values = None
        if values is None:
            values = _card_question_context(path)
        if values is None or len(values) != 4 or min(values) < 1:
            return None
        return cls(*values)

    def row_windows(self, arrays: dict, bound: bool = False) -> np.ndarray:
        """Windows of each question (int64, 1 to `max_windows`): estimated, or (`bound`) at most."""
        question = np.minimum(_pieces(arrays["question"], bound), self.max_query_length)
        context = _pieces(arrays["context"], bound)
        room = np.maximum(self.seq_length - question - 3, 1)
        step = np.minimum(room, self.stride)
        windows = 1 + -(-np.maximum(context - room, 0) // step)
        return np.minimum(windows, self.max_windows)

    def cost(self, arrays: dict, bound: bool = False) -> int | None:
        """The windows of a request (estimated, or at most); None without its two inputs."""
        try:
            return int(self.row_windows(arrays, bound=bound).sum())
        except KeyError:  # another signature of the export: no question and context to read
            return None


def _pieces(texts: np.ndarray, bound: bool) -> np.ndarray:
    """Word pieces of each text: estimated (`BYTES_PER_PIECE`), or at most (bytes that are not
    whitespace)."""
    encoded = [t if isinstance(t, bytes) else str(t).encode() for t in texts.ravel()]
    if bound:
        return np.fromiter((len(t) - sum(t.count(space) for space in _WHITESPACE) for t in encoded),
                           np.int64, count=len(encoded))
    return -(-np.fromiter(map(len, encoded), np.int64, count=len(encoded)) // BYTES_PER_PIECE)


def _card_question_context(path: str):
    """`[seq_length, max_query_length, stride, max_windows]` of an older SpanQA export's model
    card, or None."""
    try:
        with open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8") as f:
            card = json.load(f)
        settings = card["task"]["task_json"]["settings"] or {}
        return [int(card["seq_length"])] + [int(settings[key]) for key in
                                            ("max_query_length", "stride", "max_windows")]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _card_readable(path: str) -> bool:
    try:
        with open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8") as f:
            json.load(f)
        return True
    except (OSError, ValueError):
        return False
