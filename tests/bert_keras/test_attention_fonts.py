"""Hangul in the attention PNG: every character of every token label has a glyph in the font drawn with.

The pair is drawn the way `bert-keras attention` draws it (a tiny random model saved as an HF
checkpoint whose vocabulary holds the pair's words and pieces, then `attention.run`).
"""

import argparse
import os
import sys
import unicodedata
import warnings

import pytest

from bert_keras.visualization import attention_view

PAIR = ("신용 대출을 신청하고 싶어요", "신용 대출 신청은 어떻게 하나요?")
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "신용", "대출", "##을", "신청", "##하고", "##은",
              "싶어요", "어떻게", "하나요", "?"]
TOKENS = ["[CLS]", "신용", "대출", "##을", "신청", "##하고", "싶어요", "[SEP]",
          "신용", "대출", "신청", "##은", "어떻게", "하나요", "?", "[SEP]"]
HANGUL = {c for text in PAIR for c in text if "HANGUL" in unicodedata.name(c, "")}
MISSING_GLYPH = "missing from font"  # matplotlib: "Glyph 49888 (...) missing from font(s) DejaVu Sans."


def _drawn_characters():
    """Skips when no installed font (koreanize-matplotlib's NanumGothic included) has Hangul."""
    families, missing = attention_view.font_families_for(sorted(HANGUL))
    if missing:
        pytest.skip(f"no installed font has Hangul ({missing[:5]}...): pip install koreanize-matplotlib "
                    "(the `korean` and `test` extras) or apt-get install fonts-nanum")
    return families


def _korean_model(tmp_path):
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    config = BertConfig(vocab_size=len(VOCABULARY), hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=37, max_position_embeddings=40, type_vocab_size=2)
    directory = tmp_path / "model"
    save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=str(vocab))
    return f"hf:{directory}"


def _run_attention(argv):
    from bert_keras.cli import attention

    parser = argparse.ArgumentParser()
    attention.register(parser.add_subparsers(), "attention")
    return attention.run(parser.parse_args(["attention", *argv]))


def _resolved_font(prop, character):
    """The font file matplotlib draws `character` with, for text of `prop`: the first of its families
    (`font.family` fallback) whose file has a glyph for it, as `_find_fonts_by_props` + FT2Font do."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    for family in prop.get_family():
        single = prop.copy()
        single.set_family(family)
        try:
            path = font_manager.findfont(single, fallback_to_default=False)
        except ValueError:
            continue
        face = getattr(path, "face_index", 0)
        font = FT2Font(str(path), face_index=face) if face else FT2Font(str(path))
        if font.get_char_index(ord(character)) != 0:
            return str(path)
    return None


def test_korean_pair_png_has_a_glyph_for_every_character(tmp_path, monkeypatch, capsys):
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    _drawn_characters()
    spec = _korean_model(tmp_path)
    figures = []
    savefig = Figure.savefig

    def recording_savefig(self, *args, **kwargs):
        figures.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    family_before = list(matplotlib.rcParams["font.family"])
    koreanize_imported = "koreanize_matplotlib" in sys.modules
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _run_attention(["--init", spec, "--cased", "--output-dir", str(out), *PAIR]) == 0
    printed = capsys.readouterr().out
    assert f"{len(TOKENS)} tokens: {' '.join(TOKENS)}" in printed
    assert sorted(os.listdir(out)) == ["attention.html", "layer1.png"]
    with open(out / "layer1.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    # (b) matplotlib drew no box: no "Glyph ... missing from font(s)", and the writer warned of nothing.
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if MISSING_GLYPH in m or "no installed font" in m], messages

    # (a) each character of each label drawn resolves to a font file that has its glyph.
    (figure,) = figures
    labels = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text()]
    drawn = {t.get_text() for t in labels}
    assert set(TOKENS) <= drawn, sorted(set(TOKENS) - drawn)
    fonts = {}
    for text in labels:
        for character in text.get_text():
            if character.isspace():
                continue
            path = _resolved_font(text.get_fontproperties(), character)
            assert path is not None, (text.get_text(), character, text.get_fontproperties().get_family())
            fonts.setdefault(character, path)
    assert HANGUL <= set(fonts)
    hangul_fonts = sorted({fonts[c] for c in HANGUL})
    assert all("dejavu" not in os.path.basename(p).lower() for p in hangul_fonts), hangul_fonts
    assert os.path.basename(fonts["["]).startswith("DejaVuSans"), fonts["["]  # DejaVu Sans first
    print(f"Hangul drawn with {hangul_fonts}")

    # Nothing global changed for the user: rcParams as before, koreanize_matplotlib not imported.
    assert list(matplotlib.rcParams["font.family"]) == family_before
    assert ("koreanize_matplotlib" in sys.modules) == koreanize_imported


def test_characters_no_font_has_are_named_once_with_the_fix(tmp_path, monkeypatch):
    import numpy as np

    # No installed font but DejaVu Sans: the Hangul tokens cannot be drawn.
    monkeypatch.setattr(attention_view, "_candidate_families", lambda: iter(()))
    attention_view._fallback_families.cache_clear()
    tokens = ["[CLS]", "신용", "대출", "[SEP]"]
    probs = np.full((1, 2, 4, 4), 0.25, "float32")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            attention_view.attention_heatmaps_png(tokens, probs, 0, None, str(tmp_path / "boxes.png"))
    finally:
        attention_view._fallback_families.cache_clear()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages  # ours, not one per glyph from matplotlib
    (message,) = messages
    for character in "신용대출":
        assert f"'{character}' (U+{ord(character):04X})" in message
    assert 'pip install "bert-keras[korean]"' in message and "apt-get install fonts-nanum" in message
    assert os.path.isfile(tmp_path / "boxes.png")


def test_ascii_tokens_keep_dejavu_sans_alone():
    assert attention_view.font_families_for(["[CLS]", "the", "ca<t>", "##s", "\"sat\"", "[SEP]"]) == \
        (("DejaVu Sans",), "")
