"""Named datasets and their data: what `bert-keras finetune / evaluate / predict` read by `--task`.

A dataset spec names the data, the task class and how its metrics read:

* `glue/NAME` (`glue/mrpc`, `glue/stsb`, ...): TFDS GLUE, `TextClassifier`.
* `csv:PATH`: your CSV / TSV / JSONL file (`text`/`sentence`, optional `text_b` /
  `sentence2`, `label`; `question1` / `question2` pairs too), `TextClassifier` (labels: the
  training file's, sorted).
* `conll2003`: CoNLL-2003 NER (TFDS, or `--data` / `--eval-data` files in IOB1, BIO or IOBES), `TokenClassifier`.
* `swag`: SWAG CSV files, `MultipleChoice`.
* `squad/v1.1`, `squad/v2.0`: SQuAD (TFDS, or JSON files), `SpanQA`.
* `korquad/v1.0`: KorQuAD 1.0 (JSON files in SQuAD v1.1's format: `--data`, `--eval-data`), `SpanQA`
  scored with the official KorQuAD metric (`evaluation_metric="korquad"`, saved with the model). A
  file whose `"version"` is KorQuAD 1.x read as `squad/v1.1` is read as `korquad/v1.0` (with a warning).

`parse_task(spec, ...)` gives a `DatasetSpec`: `training_data()` and `evaluation_data()`
return `(x, y)` in the forms the task classes take, `model_options()` the
`from_pretrained` arguments, `provenance()` what the saved model records of the run.

Example:

>>> spec = parse_task("csv:tests/data/tasks/pairs_train.tsv")
>>> x, y = spec.training_data()
>>> spec.task_class.__name__, spec.model_options()["labels"], len(x)
('TextClassifier', ['contradiction', 'entailment', 'neutral'], 2)
"""

import os

GLUE_NAMES = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli")
TASK_FORMS = (f"glue/NAME ({', '.join(GLUE_NAMES)})", "csv:PATH", "conll2003", "swag", "squad/v1.1",
              "squad/v2.0", "korquad/v1.0")


class DatasetSpecError(ValueError):
    """An unknown task spec or missing task data (a user error).

    `suggestion` is the spec that was probably meant (`glue/sst2` for `sst2`), or None.
    """

    def __init__(self, message, suggestion=None):
        super().__init__(message + (f"; did you mean {suggestion}?" if suggestion else ""))
        self.suggestion = suggestion


def not_a_file(path):
    """Why `path` cannot be read as a data file, in words (`os.path.isfile` said no)."""
    from pipelines.datasets.text_files import not_a_file as why

    return why(path)

def suggest_task(spec, glue=False):
    """The task spec closest to an unknown one, or None.

    A bare GLUE name gets its `glue/` prefix, a file name `csv:`, a misspelling the close form.
    `glue`: `spec` is a GLUE name that is not one (`glue/sst`).

    >>> suggest_task("sst2"), suggest_task("train.tsv"), suggest_task("glue/sst", glue=True)
    ('glue/sst2', 'csv:train.tsv', 'glue/sst2')
    """
    import difflib

    name = spec.strip().lower()
    if glue:
        close = difflib.get_close_matches(name, GLUE_NAMES, n=1, cutoff=0.5)
        return f"glue/{close[0]}" if close else None
    if name in GLUE_NAMES:
        return f"glue/{name}"
    if name.startswith(("csv", "tsv", "jsonl")) or name.endswith((".csv", ".tsv", ".jsonl")):
        path = spec.strip().split(":")[-1]  # the file name as typed (a path is case-sensitive)
        return f"csv:{path}" if path and path.lower() not in ("csv", "tsv", "jsonl") else None
    others = [form for form in TASK_FORMS if not form.startswith(("glue/", "csv:"))]
    close = difflib.get_close_matches(name, [f"glue/{n}" for n in GLUE_NAMES] + others, n=1, cutoff=0.6)
    bare = difflib.get_close_matches(name, GLUE_NAMES, n=1, cutoff=0.6)
    return close[0] if close else f"glue/{bare[0]}" if bare else None


def parse_task(spec, **options):
    """The `DatasetSpec` of `spec` (see the module docstring); `options` are its settings."""
    spec = (spec or "").strip()
    lowered = spec.lower()
    if lowered.startswith("glue/"):
        from pipelines.datasets.glue import glue_task

        try:
            glue_task(lowered)
        except KeyError as error:
            raise DatasetSpecError(f"{error.args[0]} Valid task forms: {', '.join(TASK_FORMS)}",
                                   suggest_task(lowered, glue=True)) from None
        return GlueSpec(lowered, **options)
    if lowered.startswith("csv:") and len(spec) > 4:
        return CsvSpec(spec, **options)
    if lowered in ("conll2003", "conll"):
        return ConllSpec("conll2003", **options)
    if lowered == "swag":
        return SwagSpec("swag", **options)
    if lowered in ("squad/v1.1", "squad/v2.0", "squad"):
        return SquadSpec("squad/v1.1" if lowered == "squad" else lowered, **options)
    if lowered in ("korquad/v1.0", "korquad"):
        return SquadSpec("korquad/v1.0", **options)
    raise DatasetSpecError(f"unknown task {spec!r}; valid forms: {', '.join(TASK_FORMS)}", suggest_task(spec))


def text_b_column_named(options):
    """Whether the user named the second text's column (`--text-b-column`): then a file without it is
    an error, not single texts."""
    return options.get("text_b_column") is not None


def spec_of_saved(training, **options):
    """The `DatasetSpec` a saved model was trained on (its `training` provenance), or None."""
    spec = (training or {}).get("task")
    if not spec:
        return None
    kept = {key: training.get(key) for key in ("text_column", "text_b_column", "label_column",
                                               "eval_path") if training.get(key)}
    if str(spec).lower().startswith("csv:"):
        kept["regression"] = bool(training.get("regression"))
        if training.get("train_path"):  # absolute when recorded: the spec may name it relative to the old cwd
            spec = f"csv:{training['train_path']}"
    parsed = parse_task(spec, **{**kept, **{k: v for k, v in options.items() if v is not None}})
    if isinstance(parsed, CsvSpec):  # a recorded column is a default; one given now is the user's
        parsed._text_b_named = text_b_column_named(options)
    return parsed


def task_spec(task=None, *, training=None, regression=None, stride=None, **options):
    """The `DatasetSpec` of `task` (`glue/NAME`, `csv:PATH`, ...) with its settings; with no `task`, the
    one a saved model was trained on (`training`, its provenance: `spec_of_saved`), or None.

    `regression` counts for `csv:` specs only, `stride` (the context windows' step) for `squad/...`
    ones; None settings are left at their defaults.
    """
    lowered = (task or "").lower()
    if lowered.startswith("csv:"):
        options["regression"] = regression
    if lowered.startswith(("squad", "korquad")):
        options["stride"] = stride
    if not lowered and training is not None:
        return spec_of_saved(training, **options)
    return parse_task(task, **{key: value for key, value in options.items() if value is not None})


def spec_for_model(spec, task, directory, override=None):
    """`spec` (None: the model records none) checked to fit `task`, loaded from `directory`; labels set.

    Args:
        spec: a `DatasetSpec` (`parse_task` / `spec_of_saved`), or None.
        task: the task loaded from `directory`.
        directory: named in the messages.
        override: the task spec the user gave instead of the saved one (`--task`).

    Raises:
        DatasetSpecError: no spec, or one whose head is not the model's.
    """
    if spec is None:
        raise DatasetSpecError(f"{directory} records no task spec (saved from a script): pass --task "
                               "and --data, or score it with task.score(x, y) in Python")
    if not isinstance(task, spec.task_class):
        saved = (task.to_finetuned().training or {}).get("task") or task.kind
        raise DatasetSpecError(f"--task {override} needs a {spec.task_class.__name__}; {directory} holds "
                               f"a {type(task).__name__} ({saved})")
    spec.labels = task.labels
    if isinstance(spec, CsvSpec):  # the model reads pairs or single texts, whatever its data file has
        spec.text_pair = bool(task.text_pair)
    return spec


class DatasetSpec:
    """Common settings; subclasses read their data."""

    task_class = None
    # False: a training file without the label column is read as texts alone (y None), for a
    # run that needs no labels (`distill` with alpha 0: the teacher's soft targets alone).
    labels_required = True

    def __init__(self, spec, *, train_path=None, eval_path=None, text_column=None, text_b_column=None,
                 label_column="label", data_dir=None):
        self.spec = spec
        self.train_path = train_path
        self.eval_path = eval_path
        self.text_column = text_column
        self.text_b_column = text_b_column
        self.label_column = label_column or "label"
        self.data_dir = data_dir
        self.labels = None
        self.scored = None  # what the last evaluation_data read
        # {path: what named it, as the message leads with it}: a command sets it (`{"dev.tsv":
        # "--eval-data "}`, `{"x.tsv": "--task csv:"}`); a Python call reads the path alone.
        self.flags = {}

    def check_texts(self, tokenizer):
        """Refuses a text of the data read so far that `tokenizer` (the model's) reads no token of,
        naming its file and line, before a step runs. The readers refuse the texts no tokenizer
        reads (whitespace, control characters); an uncased model also strips combining marks, which
        only its tokenizer knows. A spec whose data has no lines leaves it to `fit` / `score`."""

    def check_labels(self):
        """Refuses a label of the training data read so far that the model lacks (`labels`, set to a
        fine-tuned model's: `distill`'s teacher), naming its file and line, before a step runs. A
        spec whose data has no lines leaves it to `fit`."""

    def model_options(self):
        """`from_pretrained` keyword arguments of this task."""
        return {"labels": self.labels} if self.labels else {}

    def provenance(self):
        """What the saved model records about its data (JSON-serialisable)."""
        return {"task": self.spec, "train_path": self.train_path and os.path.abspath(self.train_path),
                "eval_path": self.eval_path and os.path.abspath(self.eval_path),
                "text_column": self.text_column, "text_b_column": self.text_b_column,
                "label_column": self.label_column}

    def prepare_scoring(self, task):
        """Settings of `task` that scoring this spec's data needs (after `evaluation_data`)."""

    def format_metrics(self, metrics):
        """A readable table of `score`'s metrics."""
        width = max(len(k) for k in metrics) if metrics else 0
        # What was scored, unless the spec names it already (csv:dev.tsv was "csv:dev.tsv: dev.tsv")
        scored = self.spec if not self.scored or self.scored in self.spec else f"{self.spec}: {self.scored}"
        lines = [f"{scored} ({metrics.get('num_examples', '?')} examples)"]
        for key, value in metrics.items():
            if key != "num_examples":
                lines.append(f"  {key:<{width}}  {value:.4f}" if isinstance(value, float)
                             else f"  {key:<{width}}  {value}")
        return "\n".join(lines)

    def _not_a_file(self, path):
        """`not_a_file(path)`, led by the flag that named `path` when a command set it in `flags`
        (`--eval-data dev.tsv: no such file`)."""
        return self.flags.get(path, "") + not_a_file(path)

    # True: with no dev file named, `evaluation_data` reads the dataset's own dev split (TFDS)
    dev_split_builtin = False

    def has_dev_data(self):
        """Whether `evaluation_data()` (`bert-keras evaluate --model DIR` without --data) has dev data
        to read, without reading it: the dev file named, if it is there, else the dataset's own split."""
        if self.eval_path:
            return os.path.isfile(self.eval_path)
        return self.dev_split_builtin

    # False: `evaluation_data` reads the dataset's own split only, never a file (GLUE)
    reads_dev_files = True

    def dev_data_source(self):
        """Where `evaluation_data()` would read dev data from when it is no file the user named: the
        dataset's own split in TFDS (a download on first use, which offline waits on the network),
        and the flag for a file of the user's where the task reads one, as a note for the
        `evaluate` hint; None when it reads the user's file or nothing."""
        if self.eval_path or not self.dev_split_builtin:
            return None
        return (f"{self.spec}'s dev split from TFDS (downloaded on first use)"
                + ("; a dev file of yours: --data FILE" if self.reads_dev_files else ""))

    def _eval_path(self, path):
        path = path or self.eval_path
        if not path:
            raise DatasetSpecError(f"{self.spec}: no evaluation file; pass --eval-data PATH "
                                   "(evaluate: --data PATH)")
        if not os.path.isfile(path):
            raise DatasetSpecError(self._not_a_file(path))
        self.scored = path
        return path


class GlueSpec(DatasetSpec):
    dev_split_builtin = True
    reads_dev_files = False  # its dev split is TFDS'; a file of GLUE data is a csv: task

    def __init__(self, spec, **options):
        from pipelines.datasets.glue import glue_task
        from bert_keras.tasks.text_classifier import TextClassifier

        super().__init__(spec, **options)
        self.task_class = TextClassifier
        self.glue = glue_task(spec)
        self.labels = list(self.glue.label_names) or None

    def model_options(self):
        pair = len(self.glue.text_fields) == 2
        if self.glue.is_regression:
            return {"num_classes": 1, "text_pair": pair}
        return {"labels": self.labels, "text_pair": pair}

    def training_data(self, seed=None):
        from pipelines.datasets.glue import glue_texts

        return glue_texts(self.glue.name, "train", data_dir=self.data_dir, shuffle=True, seed=seed), None

    def evaluation_data(self, path=None):
        from pipelines.datasets.glue import glue_texts

        if path:
            raise DatasetSpecError(f"{self.spec} reads its dev split from TFDS; --data/--eval-data files are "
                                "for csv:, conll2003, swag and squad tasks")
        split = "validation_matched" if self.glue.name == "mnli" else "validation"
        self.scored = f"tfds {self.glue.tfds_name}[{split}]"
        return glue_texts(self.glue.name, split, data_dir=self.data_dir), None

    def format_metrics(self, metrics):
        from bert_keras.metrics import format_glue_table

        scores = {k: v for k, v in metrics.items() if k in self.glue.metrics}
        return (f"{self.spec} dev ({metrics.get('num_examples', '?')} examples)\n"
                + format_glue_table({self.glue.name: scores}))


class CsvSpec(DatasetSpec):
    """`csv:PATH`: classes from the training file's labels (sorted)."""

    TEXT_COLUMNS = ("text", "sentence", "sentence1", "question1", "question", "premise", "document")
    TEXT_B_COLUMNS = ("text_b", "sentence2", "question2", "hypothesis")
    TEXT_B_FALLBACK = "text_b"  # the second text's column named in messages when a file has none of them
    # Text columns that are a pair when a file has both, in GLUE's order (QNLI: question, sentence).
    TEXT_PAIRS = (("question", "sentence"),)

    def __init__(self, spec, *, regression=False, **options):
        from bert_keras.tasks.text_classifier import TextClassifier

        super().__init__(spec, **options)
        self.task_class = TextClassifier
        self.train_path = self.train_path or os.path.expanduser(spec[4:])  # the shell leaves `csv:~/...` as typed
        self.regression = regression
        self.text_pair = None  # known once the training data or the model says
        self._text_b_named = text_b_column_named(options)
        self._read_examples = {}  # {path: its TextExamples}, for `check_texts`

    def model_options(self):
        options = {"num_classes": 1} if self.regression else {"labels": self.labels}
        return dict(options, text_pair=self.text_pair)

    def provenance(self):
        return dict(super().provenance(), regression=self.regression)

    def _read(self, path):
        from pipelines.datasets.text_files import decode_text_file, read_columns, read_text_file

        if not os.path.isfile(path):
            raise DatasetSpecError(self._not_a_file(path))
        columns = read_columns(path)  # best effort: a byte that is no text reads as U+FFFD (UTF-16's NULs as NULs)
        if any("\ufffd" in column or "\0" in column for column in columns):
            # Such a file (gzip, UTF-16, cp949) got a column error listing its bytes as the columns
            # found: its own error (what it is, file and line) comes first.
            decode_text_file(path)
        if not self.text_column and not self.text_b_column and self.text_pair is not False:
            # Else the first known name alone: QNLI's files were read as their "sentence", the question
            # left out without a word.
            self.text_column, self.text_b_column = next(
                ((a, b) for a, b in self.TEXT_PAIRS if a in columns and b in columns), (None, None))
        self.text_column = self.text_column or next((c for c in self.TEXT_COLUMNS if c in columns), "text")
        # The first text's partner: `q1` -> `q2` (QQP's and Question_pair's question1 / question2), else
        # the known names. Without it, `--text-column question1` trained on question1 alone, silently.
        partner = self.text_column[:-1] + "2" if self.text_column.endswith("1") else None
        # Never the text column itself (--text-column sentence2), nor its fallback name: `--text-column
        # text_b` was refused as "read as both --text-column and --text-b-column", a flag not given.
        self.text_b_column = self.text_b_column or next(
            (c for c in (partner, *self.TEXT_B_COLUMNS) if c in columns and c != self.text_column),
            self.TEXT_B_FALLBACK if self.text_column != self.TEXT_B_FALLBACK else None)
        if self.text_b_column not in columns and (self.text_pair or (self.text_pair is None and self._text_b_named)):
            why = "the model reads text pairs" if self.text_pair else "--text-b-column"
            if self.text_b_column is None:  # the only known name is the first text's
                raise DatasetSpecError(f"{path}: no column for the second text ({why}) besides --text-column "
                                       f"{self.text_column!r}; name it with --text-b-column (columns found: "
                                       f"{sorted(columns)})")
            raise DatasetSpecError(f"{path}: no column {self.text_b_column!r} for the second text ({why}); "
                                   f"columns found: {sorted(columns)}")
        if self.text_pair is False and self.text_b_column in columns:
            raise DatasetSpecError(f"{path}: column {self.text_b_column!r} holds second texts, but the model reads "
                                   f"single texts (column {self.text_column!r}); give a file without it")
        unlabelled = not self.labels_required and self.label_column not in columns
        read = [("--text-column", self.text_column)]
        if self.text_pair is not False and self.text_b_column in columns:
            read.append(("--text-b-column", self.text_b_column))
        if not unlabelled:
            read.append(("--label-column", self.label_column))
        for i, (flag, column) in enumerate(read):
            other = next((f for f, c in read[:i] if c == column), None)
            if other:  # a model learning to name its own input (each text a class), or a pair of one text twice
                raise DatasetSpecError(f"{path}: column {column!r} would be read as both {other} and {flag}; "
                                       f"name another column for one of them (columns found: {sorted(columns)})")
        examples = read_text_file(path, text_column=self.text_column,
                                  text_b_column=None if self.text_pair is False else self.text_b_column,
                                  label_column=None if unlabelled else self.label_column,
                                  regression=self.regression)
        texts = [e.text for e in examples]
        pair = examples[0].text_b is not None
        x = (texts, [e.text_b for e in examples]) if pair else texts
        return x, None if unlabelled else [e.label for e in examples], pair, examples

    def check_texts(self, tokenizer):
        from bert_keras.tasks.inputs import NO_TOKEN
        from pipelines.tokenizer.tokenless import texts_without_token

        for examples in self._read_examples.values():
            for column, field in ((self.text_column, "text"), (self.text_b_column, "text_b")):
                texts = [getattr(example, field) for example in examples]
                empty = texts_without_token(texts, tokenizer) if None not in texts else []
                if empty:
                    raise DatasetSpecError(f"{examples[empty[0]].source}: field {column!r} is empty for this "
                                           f"model ({NO_TOKEN}); remove the row or give it a text")

    def check_labels(self):
        from pipelines.datasets.text_files import label_ids

        examples = self._read_examples.get(self.train_path)
        if examples and self.labels and not self.regression and examples[0].label is not None:
            label_ids(examples, self.labels)  # an unknown label: an error naming file:line

    def training_data(self, seed=None):
        from pipelines.datasets.text_files import build_label_vocabulary

        x, y, self.text_pair, examples = self._read(self.train_path)
        self._read_examples[self.train_path] = examples
        # A model's labels (`spec_for_model`: distill's teacher) stay: the file may hold some of them
        # (`check_labels` names one it lacks); a new model's are the file's, at least two.
        if not self.regression and y is not None and not self.labels:
            self.labels = build_label_vocabulary(examples)
            if len(self.labels) < 2:
                raise DatasetSpecError(f"{self.train_path}: only one label {self.labels}; "
                                    "classification needs at least two")
        return x, y

    def evaluation_data(self, path=None):
        from pipelines.datasets.text_files import label_ids

        x, y, _, examples = self._read(self._eval_path(path))
        self._read_examples[self.scored] = examples
        if self.labels:
            label_ids(examples, self.labels)  # an unknown label: an error naming file:line
        if self.regression and len(examples) < 2:  # before a step, not after the run (finetune --eval-data)
            raise DatasetSpecError(f"{self.scored}: {len(examples)} example; a regression is scored by its "
                                   "pearson and spearman correlations, which need 2 or more")
        return x, y


class ConllSpec(DatasetSpec):
    dev_split_builtin = True

    def __init__(self, spec, **options):
        from bert_keras.tasks.token_classifier import TokenClassifier

        super().__init__(spec, **options)
        self.task_class = TokenClassifier

    def _sentences(self, path, split):
        from pipelines.datasets import conll

        if path:
            if not os.path.isfile(path):
                raise DatasetSpecError(self._not_a_file(path))
            self.scored = path
            # CoNLL-2003 files are IOB1, others BIO or IOBES (conll.file_scheme); train and score in
            # IOB2 (BIO), as TFDS. A tag the scheme lacks: an error naming file, line and word.
            sentences = conll.read_conll(path)
            scheme = conll.file_scheme(sentences)
            return [s.with_scheme(scheme, "IOB2") for s in sentences]
        self.scored = f"tfds conll2003[{split}]"
        return conll.conll_from_tfds(split, data_dir=self.data_dir)

    def training_data(self, seed=None):
        from pipelines.datasets import conll

        sentences = self._sentences(self.train_path, "train")
        seen = {t for s in sentences for t in s.tags}
        self.labels = list(conll.CONLL2003_NER_LABELS) + sorted(seen - set(conll.CONLL2003_NER_LABELS))
        return [list(s.words) for s in sentences], [list(s.tags) for s in sentences]

    def evaluation_data(self, path=None):
        sentences = self._sentences(path or self.eval_path, "validation")
        if self.labels:  # known from the training data: a tag the model lacks, named where it is
            known = set(self.labels)
            for number, sentence in enumerate(sentences, 1):
                unknown = [i for i, tag in enumerate(sentence.tags) if tag not in known]
                if unknown:
                    where = sentence.word_source(unknown[0]) if sentence.first_line is not None else self.scored
                    raise DatasetSpecError(f"{where}: sentence {number} ({' '.join(sentence.words[:8])}...) "
                                           f"has the tag {sentence.tags[unknown[0]]!r} (word "
                                           f"{sentence.words[unknown[0]]!r}), which the training data does "
                                           f"not have (tags: {', '.join(self.labels)})")
        return [list(s.words) for s in sentences], [list(s.tags) for s in sentences]


class SwagSpec(DatasetSpec):
    def __init__(self, spec, **options):
        from bert_keras.tasks.multiple_choice import MultipleChoice

        super().__init__(spec, **options)
        self.task_class = MultipleChoice

    def model_options(self):
        return {"num_choices": 4}

    def training_data(self, seed=None):
        from pipelines.datasets.swag import read_swag_csv

        if not self.train_path:
            raise DatasetSpecError("swag: pass --data train.csv (and --eval-data val.csv), the SWAG CSV files")
        examples = read_swag_csv(self.train_path)
        return examples, [e.label for e in examples]

    def evaluation_data(self, path=None):
        from pipelines.datasets.swag import read_swag_csv

        examples = read_swag_csv(self._eval_path(path))
        return examples, [e.label for e in examples]


class SquadSpec(DatasetSpec):

    def __init__(self, spec, *, stride=None, max_query_length=None, **options):
        from bert_keras.families import SquadSettings
        from bert_keras.tasks.span_qa import SpanQA

        super().__init__(spec, **options)
        self.task_class = SpanQA
        self.version_2 = spec.endswith("v2.0")
        self.stride = stride or SquadSettings.stride  # None: SpanQA's (run_squad.py's)
        self.max_query_length = max_query_length or SquadSettings.max_query_length
        self.korquad = spec.startswith("korquad")
        self.dev_split_builtin = not self.korquad  # SQuAD's dev split is in TFDS, KorQuAD's is not
        self._scored_examples = None  # what `evaluation_data` read last

    def model_options(self):
        return {"version_2": self.version_2, "stride": self.stride,
                "max_query_length": self.max_query_length,
                **({"evaluation_metric": "korquad"} if self.korquad else {})}

    def _examples(self, path, split, is_training):
        from pipelines.datasets.squad import read_squad_json, squad_examples_from_tfds

        if path:
            if not os.path.isfile(path):
                raise DatasetSpecError(self._not_a_file(path))
            self.scored = path
            # a v2.0 task's file is v2.0 also without a "version" or "is_impossible" field
            examples = read_squad_json(path, is_training=is_training, version="2.0" if self.version_2 else "auto")
            self._check_korquad(path, examples)
            self._check_answered(path, examples, is_training)
            return examples
        if self.korquad:
            raise DatasetSpecError(
                f"{self.spec} reads JSON files (not in TFDS): --data KorQuAD_v1.0_train.json "
                "--eval-data KorQuAD_v1.0_dev.json (korquad.github.io)")
        self.scored = f"tfds {self.spec}[{split}]"
        return squad_examples_from_tfds(self.spec, split, is_training=is_training, data_dir=self.data_dir)

    def _check_answered(self, path, examples, is_training):
        """A file with unanswerable questions, for a task without them (v1.1, KorQuAD 1.0): refused
        when read, before a step, naming the file (`SpanQA` refuses such examples too, by question)."""
        from bert_keras.tasks.span_qa import V1_SCORES_ANSWERED, V1_TRAINS_ANSWERED
        from pipelines.datasets.squad import unanswerable_question

        unanswerable = None if self.version_2 else unanswerable_question(examples)
        if unanswerable is not None:
            raise DatasetSpecError(f"{path}: question {unanswerable.id!r} has no answer (a SQuAD v2.0 question), "
                                   f"but {self.spec} answers every question: "
                                   + (V1_TRAINS_ANSWERED if is_training else V1_SCORES_ANSWERED))

    def _check_korquad(self, path, examples):
        """A KorQuAD 1.0 file read as SQuAD: its official scorer is KorQuAD's, not SQuAD's.

        A file that declares itself KorQuAD 1.x (its `"version"`, "KorQuAD_v1.0") read as
        `squad/v1.1` becomes `korquad/v1.0` (saved with the model, so `evaluate` and later runs
        score it as the official KorQuAD script does), with a warning; read as `squad/v2.0` (a
        model with unanswerable questions), it is only warned about. Korean (Hangul) contexts
        without that declaration are warned about, naming `--task korquad/v1.0`.
        """
        import warnings

        from bert_keras.metrics.korquad import mostly_hangul
        from pipelines.datasets.squad import declared_version

        if self.korquad or getattr(self, "_korquad_checked", False):
            return
        self._korquad_checked = True  # one warning for the training and the dev file
        declared = declared_version(path) or ""
        if declared.lower().startswith("korquad_v1"):
            if self.version_2:
                warnings.warn(f"{path} declares \"version\": {declared!r}, but {self.spec} scores with SQuAD "
                              "v2.0's metric, for unanswerable questions KorQuAD 1.0 does not have: use "
                              "--task korquad/v1.0 (the official KorQuAD scorer: character F1)", stacklevel=2)
                return
            warnings.warn(f"{path} declares \"version\": {declared!r}: read as korquad/v1.0, not {self.spec}, and "
                          "scored as the official KorQuAD 1.0 script does (character F1, KorQuAD's "
                          "normalisation) instead of SQuAD's word F1; pass --task korquad/v1.0 to say so",
                          stacklevel=2)
            self.spec, self.korquad = "korquad/v1.0", True
        elif mostly_hangul(example.context for example in examples[:200]):
            self.korean_warned = True  # SpanQA's own warning at scoring would say it again
            warnings.warn(f"{path}: the contexts are Korean, scored with SQuAD's metric ({self.spec}: word F1, "
                          "English articles dropped); KorQuAD's official scorer (character F1) is "
                          "--task korquad/v1.0", stacklevel=2)

    def prepare_scoring(self, task):
        """`korquad/v1.0` data scored by a model saved with SQuAD's metric: scored with KorQuAD's.
        A file with unanswerable questions, read as `squad/v2.0`, for a v1.1 model: refused naming
        the file (`SpanQA.score` names the question only)."""
        from bert_keras.tasks.span_qa import V1_SCORES_ANSWERED
        from pipelines.datasets.squad import unanswerable_question

        unanswerable = None if task.settings["version_2"] else unanswerable_question(self._scored_examples or [])
        if unanswerable is not None:
            raise DatasetSpecError(f"{self.scored}: question {unanswerable.id!r} has no answer (a SQuAD v2.0 question, "
                                   f"read as {self.spec}), but the model is a SQuAD v1.1 one, which answers every "
                                   f"question: " + V1_SCORES_ANSWERED)
        if self.korquad and not self.version_2 and task.evaluation_metric != "korquad":
            task.evaluation_metric = "korquad"
        if getattr(self, "korean_warned", False):
            task.warn_korean_contexts = False

    def training_data(self, seed=None):
        return self._examples(self.train_path, "train", True), None

    def evaluation_data(self, path=None):
        self._scored_examples = self._examples(path or self.eval_path, "validation", False)
        return self._scored_examples, None


def _check_data_file(path, flag=None):
    """`DatasetSpecError` when `path` is not a file, led by the flag that named it (`--data x.json: no such file`)."""
    if not os.path.isfile(path):
        raise DatasetSpecError((f"{flag} " if flag else "") + not_a_file(path))


def _other_directory(directory_flag):
    """What to do when a prediction file would replace the input: `bert-keras predict` writes into
    the model directory (`--model`) when no --output-dir is given, so that is the flag to give."""
    return "give --output-dir DIR" if directory_flag == "--model" else None


def write_squad_predictions(task, path, directory, *, batch_size=32, overwrite=False, path_flag=None,
                            directory_flag=None, **decoding):
    """Runs a `SpanQA` on a SQuAD JSON file and writes the official prediction files.

    The files it writes in `directory` are checked before any prediction: existing ones are
    replaced only with `overwrite`, never the SQuAD file (`pipelines.output_paths`). `decoding`:
    `SpanQA.predict_squad` options (threshold, n_best_size, max_answer_length).
    `path_flag`, `directory_flag`: the flags that named `path` and `directory` (`--data`,
    `--output-dir`), which then lead the errors about them (`--data dev.json: no such file`).
    Returns `(summary line, {name: path}, scored)`: `scored`, whether `bert-keras evaluate` can
    score the file (a SQuAD file holds its answers).
    """
    from pipelines.datasets.squad import PREDICTION_FILES, read_squad_json, write_predictions
    from pipelines.output_paths import check_output_names

    check_output_names(directory, list(PREDICTION_FILES), overwrite=overwrite, inputs=[path], flag=directory_flag,
                       other=_other_directory(directory_flag))
    _check_data_file(path, path_flag)
    examples = read_squad_json(path, is_training=False)
    predictions, nbest, null_odds = task.predict_squad(examples, batch_size=batch_size, **decoding)
    paths = write_predictions(predictions, nbest, null_odds, directory)
    answered = sum(1 for text in predictions.values() if text)
    return f"{len(examples)} questions, {answered} answered", paths, True


SWAG_PREDICTIONS = "swag_predictions.jsonl"


def write_swag_predictions(task, path, directory, *, batch_size=32, overwrite=False, path_flag=None,
                           directory_flag=None, **decoding):
    """Runs a `MultipleChoice` on a SWAG CSV file (train.csv / val.csv, or the unlabelled test.csv)
    and writes `directory/swag_predictions.jsonl`: a line per example, in file order, with its
    `source` (`file:line`), `context`, `endings` (each after the shared sentence start, as the
    model reads it), the chosen ending's index `choice` and text `ending`, the `probabilities`,
    and the file's `label` where it has one.

    The file is checked before any prediction: an existing one is replaced only with `overwrite`,
    never the SWAG file. `decoding`: none (a SQuAD model's answer settings), each must be None.
    `path_flag`, `directory_flag`: as `write_squad_predictions`.
    Returns `(summary line, {name: path}, scored)` as `write_squad_predictions`; the summary
    gives the accuracy of a labelled file.
    """
    from bert_keras import json_output
    from pipelines.atomic_writes import atomic_file
    from pipelines.datasets.swag import read_swag_csv
    from pipelines.output_paths import check_output_names

    given = sorted(name for name, value in decoding.items() if value is not None)
    if given:
        raise DatasetSpecError(f"{', '.join(given)}: a SWAG model has no answer settings (a SQuAD model's)")
    check_output_names(directory, [SWAG_PREDICTIONS], overwrite=overwrite, inputs=[path], flag=directory_flag,
                       other=_other_directory(directory_flag))
    _check_data_file(path, path_flag)
    examples = read_swag_csv(path, labelled=None)
    probabilities = task.predict(examples, batch_size=batch_size)
    rows, choices = [], [int(p.argmax()) for p in probabilities]
    for example, p, choice in zip(examples, probabilities, choices):
        endings = [f"{example.start} {ending}".strip() for ending in example.endings]
        rows.append({"source": example.source, "context": example.context, "endings": endings, "choice": choice,
                     "ending": endings[choice], "probabilities": [float(v) for v in p],
                     **({} if example.label is None else {"label": example.label})})
    os.makedirs(directory, exist_ok=True)
    output = os.path.join(directory, SWAG_PREDICTIONS)
    with atomic_file(output) as f:
        f.writelines(json_output.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    scored = all(example.label is not None for example in examples)
    correct = sum(choice == example.label for choice, example in zip(choices, examples))
    summary = f"{len(rows)} examples" + (f", accuracy {correct / len(rows):.4f}" if scored else "")
    return summary, {"swag_predictions": output}, scored
