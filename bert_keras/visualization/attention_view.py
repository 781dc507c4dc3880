"""Views of BERT attention: an interactive HTML head view and PNG heatmaps (numpy + matplotlib only).

Both take the attention of ONE example, padding already removed: the
encoder's `attention_probs` (built with `output_attentions=True`) is a list of
L arrays `[batch, heads, S, S]`; pass `[probs[0, :, :n, :n] for probs in ...]`
where `n` is the number of real tokens (a leading batch axis of size 1 is
also accepted and dropped). Row `i` of a `[S, S]` matrix is where token `i`
looks: it sums to 1 over the keys `j`.

* `head_view_html` returns one self-contained HTML page (inline CSS, SVG and
  JavaScript; nothing is fetched): the tokens twice, side by side, a line
  from each token on the left (the query) to each token on the right (the
  key) whose opacity is the attention weight (from `HTML_MIN_WEIGHT`, 0.005:
  lighter lines would not show, and are not stored), one colour per head, a
  layer selector and head checkboxes, and the [CLS] A [SEP] / B [SEP] segments
  shaded apart. Hovering a token shows only its lines. A long text's page
  opens with only the first heads whose lines fit `HTML_MAX_OPEN_LINES` ticked,
  and holds 1 layer in k (the opened one among them) past `HTML_MAX_LINES`,
  each with a warning and a note in the page. `save_head_view_html` writes it
  to a file.
* `attention_heatmaps_png` draws one layer as a grid of heatmaps, one per
  head (or the heads asked for), tokens on both axes; at most `PNG_MAX_PIXELS`
  (a long text's panels shrink to fit, labelling 1 token in k: `heatmap_layout`). Tokens DejaVu Sans
  (matplotlib's default) has no glyphs for, Hangul, Chinese or Japanese, are
  drawn with an installed font that has them, through matplotlib's font
  fallback: the NanumGothic of the `[korean]` extra (koreanize-matplotlib's
  font files, registered without importing it, since importing it changes
  matplotlib's global settings), or a system font (fonts-nanum, Noto CJK, ...).
  Characters no installed font has draw as boxes, with one warning naming
  them and the fix.

Files are written atomically: to a temporary file beside the target, then
renamed over it, so a reader never sees half a file.
"""

import contextlib
import functools
import html
import importlib.util
import json
import os
import unicodedata
import warnings

import numpy as np

from pipelines.atomic_writes import atomic_file, write_text

# Attention weights stored in the HTML: 4 decimals (more are invisible as opacity), and only those
# of at least HTML_MIN_WEIGHT: a lighter line is not drawn (it would not show), and most weights of a
# long text are that light (94% of MiniLM's over a 512-token text, whose page was 116 MB stored whole
# and drew 183,000 lines at each redraw; stored sparse it is a tenth of that).
HTML_DECIMALS = 4
HTML_MIN_WEIGHT = 0.005
# What a page holds and draws, in those lines: at most HTML_MAX_OPEN_LINES when it opens (every
# hover and tick redraws them all; MiniLM's 12 heads draw 25,000 on a 64-token text, 64,000 on 128
# tokens, 160,000 to 250,000 on 512: seconds per hover), and at most HTML_MAX_LINES stored (about 11
# bytes each: MiniLM's 6 x 12 heads of 512 tokens are 1.1 million, 12 MB; a 24-layer model's 4
# million). Past them the page opens with fewer heads ticked, and holds every k-th layer (the opened
# one among them), each said in a warning and in the page.
HTML_MAX_OPEN_LINES = 50_000
HTML_MAX_LINES = 1_500_000

# The PNG: inches per token on each axis (room for a 7-point label), the least for a label (a
# smaller pitch labels every k-th token), the resolution and the most pixels it has (a 512-token text
# with all 12 heads would otherwise be a 45,000 x 34,000 pixel picture: minutes and ~8 GB to draw).
PNG_TOKEN_INCHES = 0.22
PNG_LABEL_INCHES = 0.11
PNG_DPI = 100
PNG_MAX_PIXELS = 40_000_000
PNG_TITLE_INCHES = 0.6
PNG_COLORBAR_INCHES = 1.0

# The PNG's first font (matplotlib ships it): Latin, Greek, Cyrillic, symbols; no Hangul, no CJK.
BASE_FONT_FAMILY = "DejaVu Sans"

# Fonts tried, in this order, for characters the base font lacks: Hangul fonts first (NanumGothic is the
# one the `[korean]` extra brings), then Chinese / Japanese ones. When characters are still missing,
# every other installed font is tried, by name.
FALLBACK_FONT_FAMILIES = (
    "NanumGothic", "NanumBarunGothic", "Noto Sans CJK KR", "Noto Sans KR", "Source Han Sans KR",
    "Apple SD Gothic Neo", "Malgun Gothic", "UnDotum", "Baekmuk Gulim",
    "Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Source Han Sans", "IPAexGothic",
    "IPAGothic", "TakaoGothic", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback",
    "Hiragino Sans", "Yu Gothic", "Microsoft YaHei", "SimHei", "Arial Unicode MS",
)

# The package whose font files (NanumGothic) are registered with matplotlib when Hangul is drawn.
BUNDLED_FONTS_PACKAGE = "koreanize_matplotlib"


def head_view_html(tokens_a_and_b, attention_probs, *, layer=None, head=None, title="BERT attention",
                   segment_ids=None, initial_layer=None, max_open_lines=HTML_MAX_OPEN_LINES,
                   max_lines=HTML_MAX_LINES):
    """A self-contained HTML page showing attention as lines between tokens.

    Example:

    >>> import numpy as np
    >>> tokens = ["[CLS]", "the", "cat", "[SEP]", "it", "sat", "[SEP]"]
    >>> probs = np.full((2, 3, 7, 7), 1 / 7, "float32")  # 2 layers, 3 heads
    >>> page = head_view_html(tokens, probs, title="demo")
    >>> page.startswith("<!DOCTYPE html>"), "2 layers" in page, "3 heads" in page, "http" in page
    (True, True, True, False)

    Args:
        tokens_a_and_b: the packed tokens, `[CLS] A [SEP]` or
            `[CLS] A [SEP] B [SEP]`, one string each, padding removed.
        attention_probs: `[L, heads, S, S]` array, or a list of L arrays
            `[heads, S, S]` (or `[1, heads, S, S]`), `S = len(tokens_a_and_b)`.
        layer: int or None. Only this layer (0-based) goes into the page;
            None (default) puts in every layer, with a selector.
        initial_layer: int or None. The layer selected when the page opens
            (show the one a PNG next to it shows); None: the last layer, the
            one `bert-keras attention` draws by default. Ignored with `layer`.
        head: int or None. Only this head is ticked when the page opens
            (the others can be ticked); None ticks all heads.
        title: str. Page title and heading.
        segment_ids: optional list of 0/1 per token; by default every token
            after the first `[SEP]` is segment B.
        max_open_lines: with `head=None`, the most lines drawn when the page
            opens: past it only the first heads that fit are ticked (the others
            can be ticked), with a warning. None: all heads.
        max_lines: with `layer=None`, the most lines the page stores: past it
            it holds every k-th layer (with the opened one), with a warning.
            None: every layer.

    Returns:
        The HTML document, a str.

    Raises:
        ValueError: shapes that do not match the tokens, or a layer/head out
            of range (the message gives the valid range).
    """
    tokens = [str(t) for t in tokens_a_and_b]
    probs = _as_layers(attention_probs, len(tokens))
    layers, opened, initial_heads, segments, summary, notes = _page_plan(
        tokens, probs, layer, head, segment_ids, initial_layer, max_open_lines, max_lines)
    for short, why in notes:
        warnings.warn(f"attention page of {len(tokens)} tokens: {short}: {why}", UserWarning, stacklevel=3)
    num_layers, num_heads = probs.shape[:2]
    data = {
        "tokens": tokens,
        "segments": [int(s) for s in segments],
        "layers": layers,
        "num_layers": int(num_layers),
        "initial_layer": int(opened),
        "num_heads": int(num_heads),
        "initial_heads": initial_heads,
        # attention[k] is layer layers[k]: [heads][query], each query's drawn lines as a flat
        # [key, weight, key, weight, ...] list (weights of at least HTML_MIN_WEIGHT).
        "attention": _sparse_rows(probs[layers]),
    }
    # JSON inside <script>: escape <, > and & so no token can close the tag.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (_PAGE.replace("__TITLE__", html.escape(title))
            .replace("__SUMMARY__", html.escape(summary))
            .replace("__DATA__", payload))


def head_view_summary(tokens_a_and_b, attention_probs, **kwargs):
    """What the page `head_view_html` makes of these arguments holds and opens with, in one line
    (the page's own heading line; `bert-keras attention` prints it): the layers and heads, the
    tokens, the opened layer, and what a long text's page thins (1 layer in k stored, fewer heads
    ticked) or the one head asked for.

    >>> import numpy as np
    >>> head_view_summary(["[CLS]", "a", "[SEP]"], np.full((2, 3, 3, 3), 1 / 3), head=1)
    '2 layers, 3 heads, 3 tokens; opens on layer 1; opens with head 1 of 3 ticked'

    Args:
        tokens_a_and_b, attention_probs, **kwargs: as for `head_view_html` (`title` is ignored).
    """
    kwargs.pop("title", None)
    tokens = [str(t) for t in tokens_a_and_b]
    return _page_plan(tokens, _as_layers(attention_probs, len(tokens)), **kwargs)[4]


def _page_plan(tokens, probs, layer=None, head=None, segment_ids=None, initial_layer=None,
               max_open_lines=HTML_MAX_OPEN_LINES, max_lines=HTML_MAX_LINES):
    """`head_view_html`'s choices, checked: `(layers stored, opened layer, heads ticked, segments,
    the summary line, notes)`; a note is `(what the summary says, why)`."""
    num_layers, num_heads = probs.shape[:2]
    layers = list(range(num_layers)) if layer is None else [_check_index("layer", layer, num_layers)]
    if head is not None:
        _check_index("head", head, num_heads)
    opened = layers[-1] if initial_layer is None or layer is not None else initial_layer
    _check_index("initial_layer", opened, num_layers)
    segments = list(segment_ids) if segment_ids is not None else _segments_from_sep(tokens)
    if len(segments) != len(tokens):
        raise ValueError(f"{len(segments)} segment ids for {len(tokens)} tokens")
    lines = (np.round(probs.astype(np.float64), HTML_DECIMALS) >= HTML_MIN_WEIGHT).sum(axis=(2, 3))  # [L, heads]
    notes = []  # (what the page's summary says, why)
    if layer is None and max_lines is not None and lines.sum() > max_lines:
        layers = _layers_within(lines.sum(axis=1), opened, max_lines)
        step = layers[1] - layers[0] if len(layers) > 1 else num_layers
        notes.append((f"holds layers {', '.join(map(str, layers))} of 0..{num_layers - 1} (1 in {step}, with the "
                      "opened one)", f"all {num_layers} would be {int(lines.sum()):,} lines, more than "
                      f"{max_lines:,}; one layer alone: layer=L (bert-keras attention --layer L)"))
    initial_heads = list(range(num_heads)) if head is None else [int(head)]
    if head is None and max_open_lines is not None and lines[opened].sum() > max_open_lines:
        fit = int(np.searchsorted(np.cumsum(lines[opened]), max_open_lines, side="right"))
        initial_heads = list(range(max(1, fit)))
        ticked = f"heads 0-{initial_heads[-1]}" if len(initial_heads) > 1 else "head 0"
        notes.append((f"opens with {ticked} of {num_heads} ticked", f"all {num_heads} draw "
                      f"{int(lines[opened].sum()):,} lines on layer {opened}, more than {max_open_lines:,} (slow at "
                      "each redraw); tick the others in the page"))
    said = [short for short, _ in notes] + ([] if head is None else [f"opens with head {int(head)} of {num_heads} ticked"])
    summary = (f"{num_layers} layers, {num_heads} heads, {len(tokens)} tokens"
               + (f"; opens on layer {opened}" if layer is None else f"; showing layer {layer}")
               + "".join(f"; {short}" for short in said))
    return layers, opened, initial_heads, segments, summary, notes


def save_head_view_html(path, tokens_a_and_b, attention_probs, **kwargs):
    """Writes `head_view_html(...)` to `path` atomically and returns `path`.

    Example:

    >>> save_head_view_html("attention.html", tokens, probs, layer=5)  # doctest: +SKIP

    Args:
        path: the .html file to write (parent directories are created).
        tokens_a_and_b, attention_probs, **kwargs: as for `head_view_html`.
    """
    page = head_view_html(tokens_a_and_b, attention_probs, **kwargs)
    write_text(path, page)
    return path


def attention_heatmaps_png(tokens, attention_probs, layer, heads, path):
    """Draws one layer's attention as heatmaps (one per head) into a PNG file.

    Example:

    >>> import numpy as np, tempfile, os
    >>> probs = np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 4, 5))  # [L, heads, S, S]
    >>> path = os.path.join(tempfile.mkdtemp(), "layer1.png")
    >>> attention_heatmaps_png(["[CLS]", "a", "b", "c", "[SEP]"], probs, 1, None, path) == path
    True

    Args:
        tokens: the S token strings (padding removed).
        attention_probs: as for `head_view_html`.
        layer: int, 0-based layer to draw.
        heads: None for all heads, an int for one, or a list of ints.
        path: the .png file to write (atomically; parent directories are
            created). At most `PNG_MAX_PIXELS` pixels: with many tokens the
            panels shrink and only 1 token in k is labelled (`heatmap_layout`;
            one head has the whole picture).

    Returns:
        `path`.
    """
    # Agg through the object API: no pyplot, so no global backend or open
    # figures are touched (safe in servers, threads and notebooks).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tokens = [str(t) for t in tokens]
    probs = _as_layers(attention_probs, len(tokens))
    num_layers, num_heads = probs.shape[:2]
    _check_index("layer", layer, num_layers)
    if heads is None:
        heads = list(range(num_heads))
    elif isinstance(heads, (int, np.integer)):
        heads = [heads]
    for h in heads:
        _check_index("head", h, num_heads)

    columns = min(4, len(heads))
    rows = -(-len(heads) // columns)
    panel, label_every = heatmap_layout(len(tokens), columns, rows)
    heads_text = "all heads" if len(heads) == num_heads else "head " + ", ".join(map(str, heads))
    if label_every > 1:
        heads_text += f"; 1 token in {label_every} labelled: one head has them all"
    # The tokens' fonts (the other texts are ASCII), given to their tick labels only: no rcParams change.
    families, missing = font_families_for(tokens)
    if missing:
        warnings.warn(f"{path}: {_missing_font_message(missing)}", UserWarning, stacklevel=2)
    token_font = {"fontsize": 7, "fontfamily": list(families)}
    width, height = panel * columns, panel * rows + PNG_TITLE_INCHES
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    # Placed by hand, not by matplotlib's constrained layout: that draws the whole picture once
    # more to measure it (half of the time of a 512-token text's 12 heads: thousands of labels).
    # The room for the labels is measured on the widest of them instead.
    labelled = tokens[::label_every]
    with warnings.catch_warnings() if missing else contextlib.nullcontext():
        if missing:  # said once above, not again by matplotlib for each glyph measured
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        label_inches = _widest_label_inches(figure, labelled, token_font)
    axes = _heatmap_axes(figure, len(heads), columns, rows, panel, label_inches)
    image = None
    for ax, h in zip(axes, heads):
        image = ax.imshow(probs[layer, h], cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest",
                          aspect="auto")
        ax.set_title(f"head {h}", fontsize=10)
        ticks = range(0, len(tokens), label_every)
        ax.set_xticks(ticks, labelled, rotation=90, **token_font)
        ax.set_yticks(ticks, labelled, **token_font)
        ax.set_xlabel("key (attended to)", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    colorbar = figure.add_axes(_inches_box(figure, width - PNG_COLORBAR_INCHES + 0.15,
                                           rows * panel * 0.1, 0.2, rows * panel * 0.8))
    figure.colorbar(image, cax=colorbar, label="attention weight")
    figure.text(0.5, 1 - (PNG_TITLE_INCHES / 2) / height, f"layer {layer} ({heads_text})",
                ha="center", va="center", fontsize=12)
    with atomic_file(path, "wb") as f, (warnings.catch_warnings() if missing else contextlib.nullcontext()):
        if missing:  # said once above, not again by matplotlib for each glyph of each label
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        figure.savefig(f, format="png", dpi=PNG_DPI)
    return path


def _widest_label_inches(figure, labels, font):
    """Inches taken by the widest of `labels` drawn in `font` (the longest ones are measured)."""
    if not labels:
        return 0.0
    renderer = figure.canvas.get_renderer()
    widest = 0.0
    for label in sorted(set(labels), key=len, reverse=True)[:8]:
        text = figure.text(0, 0, label, **font)
        widest = max(widest, text.get_window_extent(renderer).width / figure.dpi)
        text.remove()
    return widest


def _inches_box(figure, left, bottom, width, height):
    """`[left, bottom, width, height]` in inches as the figure fractions `add_axes` takes."""
    figure_width, figure_height = figure.get_size_inches()
    return [left / figure_width, bottom / figure_height, width / figure_width, height / figure_height]


def _heatmap_axes(figure, count, columns, rows, panel, label_inches):
    """`count` square heatmap axes on a `rows x columns` grid of `panel`-inch cells (the colorbar's
    strip taken from the right), each with room on its left and below for its token labels (at
    most 40% of a cell) and its axis label, and above for its title."""
    cell = (columns * panel - PNG_COLORBAR_INCHES) / columns
    margin = min(label_inches, 0.4 * cell) + 0.35  # tick labels, then the axis label beside them
    side = max(cell - margin - 0.35, 0.5)  # 0.35: the title above, a gap to the next cell
    axes = []
    for index in range(count):
        row, column = divmod(index, columns)
        left = column * cell + margin
        bottom = (rows - 1 - row) * panel + (panel - side - 0.35)
        axes.append(figure.add_axes(_inches_box(figure, left, bottom, side, side)))
    return axes


def heatmap_layout(num_tokens, columns, rows):
    """`(panel, label_every)`: the inches of each square heatmap of `attention_heatmaps_png` and
    which tokens get a label (every one: 1, every k-th: k).

    A panel gives each token `PNG_TOKEN_INCHES` (and 1.2 inches of labels around it), at least
    3 inches, as long as the whole picture stays within `PNG_MAX_PIXELS`; past that the panels
    shrink to fit it, and where a token gets less than `PNG_LABEL_INCHES` only every k-th is
    labelled (one head, `heads=H`, has the whole picture to itself).

    Example:

    >>> heatmap_layout(7, 4, 3)
    (3.0, 1)
    >>> panel, every = heatmap_layout(512, 4, 3)  # all 12 heads of a 512-token text
    >>> round(panel, 1), every, (4 * panel) * (3 * panel + PNG_TITLE_INCHES) * PNG_DPI ** 2 <= PNG_MAX_PIXELS
    (18.2, 4, True)
    >>> heatmap_layout(512, 1, 1)[1]                # one head: every token labelled
    1
    """
    panel = max(3.0, PNG_TOKEN_INCHES * num_tokens + 1.2)
    # The largest square panel p with (columns * p) x (rows * p + title) inches within the pixels.
    budget = PNG_MAX_PIXELS / PNG_DPI ** 2  # square inches
    a, b = columns * rows, columns * PNG_TITLE_INCHES
    largest = (-b + np.sqrt(b * b + 4 * a * budget)) / (2 * a)
    panel = min(panel, max(3.0, float(largest)))
    pitch = (panel - 1.2) / max(num_tokens, 1)
    return panel, max(1, int(np.ceil(PNG_LABEL_INCHES / pitch - 1e-9)))


def font_families_for(texts):
    """The fonts that draw `texts`: `(families, missing)`, for matplotlib's `font.family`.

    `families` starts with `BASE_FONT_FAMILY` (DejaVu Sans); after it come
    installed fonts, each covering characters the ones before it lack (matplotlib
    takes each glyph from the first font in the list that has it). `missing`:
    the characters (a str, sorted) no installed font has.

    When characters beyond DejaVu Sans are drawn, the NanumGothic font files of
    koreanize-matplotlib (the `[korean]` extra), if installed, are registered
    with `matplotlib.font_manager.fontManager` first; matplotlib's settings
    (`rcParams`) are left alone.

    Example:

    >>> font_families_for(["[CLS]", "the", "cat"])
    (('DejaVu Sans',), '')
    >>> font_families_for(["[CLS]", "신용", "대출"])  # doctest: +SKIP
    (('DejaVu Sans', 'NanumGothic'), '')
    """
    from matplotlib import font_manager

    characters = sorted({c for text in texts for c in str(text) if c.isprintable() and not c.isspace()})
    base = _font_path(BASE_FONT_FAMILY)
    needed = tuple(c for c in characters if base is None or not _has_glyph(base, c))
    if not needed:
        return (BASE_FONT_FAMILY,), ""
    _register_bundled_fonts()
    # The number of fonts known is part of the key: a font added since is tried.
    return _fallback_families(needed, len(font_manager.fontManager.ttflist))


# ---- helpers -------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _fallback_families(characters, _font_count):
    """`font_families_for`'s answer for the characters DejaVu Sans lacks (a tuple)."""
    families, missing = [BASE_FONT_FAMILY], list(characters)
    for family in _candidate_families():
        if not missing:
            break
        path = _font_path(family)
        if path is None:
            continue
        covered = {c for c in missing if _has_glyph(path, c)}
        if covered:
            families.append(family)
            missing = [c for c in missing if c not in covered]
    return tuple(families), "".join(missing)


def _candidate_families():
    """The installed fonts with a regular face: `FALLBACK_FONT_FAMILIES` first, then the others by name."""
    from matplotlib import font_manager

    # Only families with a regular face (normal style, weight 400): the labels' own, found without
    # matplotlib's "Failed to find font weight" log lines.
    installed = {entry.name for entry in font_manager.fontManager.ttflist
                 if entry.style == "normal" and entry.weight in (400, "normal", "regular")}
    preferred = [name for name in FALLBACK_FONT_FAMILIES if name in installed]
    yield from preferred
    yield from sorted(installed - set(preferred) - {BASE_FONT_FAMILY})


def _font_path(family):
    """The font file matplotlib draws `family` with (regular weight), or None when it has no such font."""
    from matplotlib import font_manager

    try:
        return font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
    except ValueError:
        return None


def _has_glyph(path, character):
    return _font_file(str(path), getattr(path, "face_index", 0)).get_char_index(ord(character)) != 0


@functools.lru_cache(maxsize=64)
def _font_file(path, face_index):
    from matplotlib.ft2font import FT2Font

    # matplotlib < 3.10 names no face (it always reads the first of a .ttc collection).
    return FT2Font(path, face_index=face_index) if face_index else FT2Font(path)


_REGISTERED_DIRECTORIES = set()


def _register_bundled_fonts():
    """Makes koreanize-matplotlib's fonts (NanumGothic) known to matplotlib, once, without importing it.

    Importing `koreanize_matplotlib` would set matplotlib's default font for the whole program
    (`rcParams["font.family"] = "NanumGothic"`); only its font files are wanted here.
    """
    from matplotlib import font_manager

    try:
        spec = importlib.util.find_spec(BUNDLED_FONTS_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return
    for package_dir in spec.submodule_search_locations:
        directory = os.path.join(package_dir, "fonts")
        if directory in _REGISTERED_DIRECTORIES or not os.path.isdir(directory):
            continue
        _REGISTERED_DIRECTORIES.add(directory)
        known = {os.path.realpath(entry.fname) for entry in font_manager.fontManager.ttflist}
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.lower().endswith((".ttf", ".otf")) and os.path.realpath(path) not in known:
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # an unreadable file: the others still count
                    continue


def _missing_font_message(missing):
    """What `attention_heatmaps_png` warns when no installed font has some characters."""
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in missing[:20])
    if len(missing) > 20:
        shown += f" and {len(missing) - 20} more"
    names = " ".join(unicodedata.name(c, "") for c in missing)
    fixes = []
    if "HANGUL" in names:
        fixes.append('pip install "bert-keras[korean]" (NanumGothic) or apt-get install fonts-nanum')
    if any(script in names for script in ("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPH")):
        fixes.append("apt-get install fonts-noto-cjk (Chinese, Japanese and Korean)")
    fixes = " or ".join(fixes) or "install a font that has them"
    return (f"no installed font has a glyph for {shown}: they are drawn as empty boxes. To draw them, "
            f"{fixes}; after installing a system font, delete matplotlib's font cache (the fontlist-*.json "
            "files in matplotlib.get_cachedir()) so that matplotlib finds it.")


def _as_layers(attention_probs, num_tokens):
    """`[L, heads, S, S]` float32 from an array or a list of per-layer arrays."""
    layers = []
    for probs in attention_probs:
        probs = np.asarray(probs, dtype=np.float32)
        if probs.ndim == 4 and probs.shape[0] == 1:
            probs = probs[0]  # one example with its batch axis
        if probs.ndim != 3:
            raise ValueError(f"each layer's attention must be [heads, S, S] for one example; got {probs.shape}")
        layers.append(probs)
    if not layers:
        raise ValueError("attention_probs is empty: build the encoder with output_attentions=True")
    probs = np.stack(layers)
    if probs.shape[-2:] != (num_tokens, num_tokens):
        raise ValueError(
            f"attention is {probs.shape[-2]} x {probs.shape[-1]} but there are {num_tokens} tokens "
            "(drop the padded positions from the attention too)"
        )
    return probs


def _sparse_rows(probs):
    """`[L][heads][query]` lists `[key, weight, ...]` of the weights (4 decimals) of at least `HTML_MIN_WEIGHT`."""
    rounded = np.round(probs.astype(np.float64), HTML_DECIMALS)
    shown = rounded >= HTML_MIN_WEIGHT
    return [[[[value for j in np.flatnonzero(row_shown) for value in (int(j), float(row[j]))]
              for row, row_shown in zip(head, head_shown)]
             for head, head_shown in zip(layer, layer_shown)]
            for layer, layer_shown in zip(rounded, shown)]


def _layers_within(per_layer, opened, budget):
    """The layers a page holds within `budget` lines (`per_layer[l]`: layer l's): every k-th
    layer, `opened` among them, for the smallest k that fits (`opened` alone at worst)."""
    count = len(per_layer)
    for step in range(2, count + 1):
        layers = list(range(opened % step, count, step))
        if per_layer[layers].sum() <= budget:
            return layers
    return [opened]


def _check_index(what, value, count):
    if not isinstance(value, (int, np.integer)) or not 0 <= value < count:
        raise ValueError(f"{what} {value} is out of range: valid {what}s are 0..{count - 1} ({count} in all)")
    return int(value)


def _segments_from_sep(tokens):
    """0 up to and including the first [SEP], 1 after it (BERT's segment ids)."""
    if "[SEP]" not in tokens:
        return [0] * len(tokens)
    first_sep = tokens.index("[SEP]")
    return [0 if i <= first_sep else 1 for i in range(len(tokens))]


# The page: plain SVG drawn by ~100 lines of inline JavaScript (no libraries).
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  .summary { color: #666; margin-bottom: 1em; }
  .controls { display: flex; flex-wrap: wrap; gap: .4em 1em; align-items: center; margin-bottom: 1em; }
  .head { display: inline-flex; align-items: center; gap: .25em; font-size: .9em; }
  .swatch { width: .9em; height: .9em; border-radius: 2px; display: inline-block; }
  svg text { font-family: ui-monospace, monospace; font-size: 13px; cursor: default; }
  svg text.dim { fill: #bbb; }
  .help { color: #666; font-size: .85em; max-width: 50em; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<div class="summary">__SUMMARY__</div>
<div class="controls">
  <label>layer <select id="layer"></select></label>
  <span id="heads"></span>
  <button type="button" id="all">all heads</button>
  <button type="button" id="none">no heads</button>
</div>
<svg id="view"></svg>
<p class="help">Left: each token as the query; right: the tokens it attends to. Line opacity is the
attention weight, one colour per head. Hover a token to see only its lines. Shading marks segment A
([CLS] A [SEP]) and segment B (B [SEP]).</p>
<script type="application/json" id="attention-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("attention-data").textContent);
  var svg = document.getElementById("view");
  // The SVG namespace, read from the inline <svg> (the HTML parser sets it): no URL in the page.
  var SVG = svg.namespaceURI;
  var n = data.tokens.length, rowHeight = 22, top = 30, textWidth = 150, gap = 240;
  var leftX = textWidth, rightX = textWidth + gap, width = 2 * textWidth + gap;
  svg.setAttribute("width", width);
  svg.setAttribute("height", top + n * rowHeight + 10);
  var layerSelect = document.getElementById("layer");
  var headsBox = document.getElementById("heads");
  var focus = null;  // {side: "left"|"right", index} while a token is hovered

  function colour(h) { return "hsl(" + Math.round(360 * h / data.num_heads) + ",70%,45%)"; }
  function y(i) { return top + i * rowHeight + rowHeight / 2; }
  function element(name, attributes, parent) {
    var node = document.createElementNS(SVG, name);
    for (var key in attributes) node.setAttribute(key, attributes[key]);
    parent.appendChild(node);
    return node;
  }

  data.layers.forEach(function (layer, k) {
    var option = document.createElement("option");
    option.value = k; option.textContent = layer + " of 0.." + (data.num_layers - 1);
    option.selected = layer === data.initial_layer;
    layerSelect.appendChild(option);
  });
  layerSelect.value = String(data.layers.indexOf(data.initial_layer));
  for (var h = 0; h < data.num_heads; h++) {
    var label = document.createElement("label");
    label.className = "head";
    label.title = "head " + h;
    var box = document.createElement("input");
    box.type = "checkbox"; box.value = h; box.checked = data.initial_heads.indexOf(h) >= 0;
    var swatch = document.createElement("span");
    swatch.className = "swatch"; swatch.style.background = colour(h);
    label.appendChild(box); label.appendChild(swatch); label.appendChild(document.createTextNode(h));
    headsBox.appendChild(label);
  }

  // Static parts: segment shading, column titles, the tokens on both sides.
  var lastA = data.segments.lastIndexOf(0);
  [[0, lastA, "#eef4ff", "A"], [lastA + 1, n - 1, "#fff4e6", "B"]].forEach(function (s) {
    if (s[1] < s[0]) return;
    element("rect", {x: 0, y: top + s[0] * rowHeight, width: width, height: (s[1] - s[0] + 1) * rowHeight,
                     fill: s[2]}, svg);
    element("text", {x: 4, y: top + s[0] * rowHeight + 14, fill: "#999"}, svg).textContent = s[3];
  });
  if (lastA < n - 1) {
    element("line", {x1: 0, x2: width, y1: top + (lastA + 1) * rowHeight, y2: top + (lastA + 1) * rowHeight,
                     stroke: "#999", "stroke-dasharray": "4 3"}, svg);
  }
  element("text", {x: leftX - 6, y: 16, "text-anchor": "end", fill: "#666"}, svg).textContent = "query";
  element("text", {x: rightX + 6, y: 16, fill: "#666"}, svg).textContent = "key";
  var lines = element("g", {}, svg);
  var labels = {left: [], right: []};
  data.tokens.forEach(function (token, i) {
    ["left", "right"].forEach(function (side) {
      var text = element("text", side === "left"
        ? {x: leftX - 6, y: y(i) + 4, "text-anchor": "end"} : {x: rightX + 6, y: y(i) + 4}, svg);
      text.textContent = token;
      text.addEventListener("mouseenter", function () { focus = {side: side, index: i}; draw(); });
      text.addEventListener("mouseleave", function () { focus = null; draw(); });
      labels[side].push(text);
    });
  });

  function checkedHeads() {
    return Array.prototype.filter.call(headsBox.querySelectorAll("input"), function (b) { return b.checked; })
      .map(function (b) { return +b.value; });
  }

  function draw() {
    while (lines.firstChild) lines.removeChild(lines.firstChild);
    var attention = data.attention[+layerSelect.value];
    checkedHeads().forEach(function (h) {
      for (var i = 0; i < n; i++) {
        if (focus && focus.side === "left" && focus.index !== i) continue;
        // The visible weights only, [key, weight, key, weight, ...] (lighter lines would not show).
        var row = attention[h][i];
        for (var m = 0; m < row.length; m += 2) {
          var j = row[m], weight = row[m + 1];
          if (focus && focus.side === "right" && focus.index !== j) continue;
          element("line", {x1: leftX, y1: y(i), x2: rightX, y2: y(j), stroke: colour(h),
                           "stroke-width": 2, "stroke-opacity": weight}, lines);
        }
      }
    });
    ["left", "right"].forEach(function (side) {
      labels[side].forEach(function (text, i) {
        text.setAttribute("class", focus && focus.side === side && focus.index !== i ? "dim" : "");
      });
    });
  }

  layerSelect.addEventListener("change", draw);
  headsBox.addEventListener("change", draw);
  document.getElementById("all").addEventListener("click", function () {
    headsBox.querySelectorAll("input").forEach(function (b) { b.checked = true; }); draw();
  });
  document.getElementById("none").addEventListener("click", function () {
    headsBox.querySelectorAll("input").forEach(function (b) { b.checked = false; }); draw();
  });
  draw();
})();
</script>
</body>
</html>
"""
