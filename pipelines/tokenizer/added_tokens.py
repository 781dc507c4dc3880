"""Added tokens (HF's `add_tokens` / `additional_special_tokens`): found whole in the text before
BERT's rules split it, as HF's `AddedVocabulary` does, in graph ops.

HF (`tokenizers`) finds the added tokens in two passes: those with `normalized=False` (special
tokens by default) in the raw text, then those with `normalized=True` in what is left, after
the normalizer (so, for an uncased model, ignoring case). Matches are leftmost-longest; a
`single_word` token that has a word character (`\\w`) right before or after it is no match;
`lstrip` / `rstrip` take the whitespace before / after it into the token (and its offsets) once
it is found by its content (an rstrip token's whitespace first: an lstrip one takes what is left). The
text between the matches is tokenized by the usual rules, each piece on its own.

The matches are found by hash, not by one regex of all the tokens (which outgrows RE2's memory
from a few thousand tokens): at every character, the text of each token length (in characters)
there is looked up; the longest found is that position's match, and the matches are taken from the
left, each search resuming after the previous match. The cost grows with the text and the number of
distinct token lengths, not with the number of tokens.

Here the normalized pass looks up the raw text's characters as HF's BERT normalizer leaves them
(control and format characters dropped, whitespace a space, lowercased for an uncased tokenizer,
accents stripped when it strips them: `_cleaning_tables`, from the tables of `BertPreTokenizer`),
and the tokens likewise, so "cafe" and "CAFÉ" find "café", and "[NE\\u200bW]" or "[N\\u0301EW]" find
"[NEW]", as in HF, which matches the normalized text. A match starts and ends at characters the
normalizer keeps (a stripped mark after "cafe" is outside "café"'s offsets, as in HF's); its lstrip /
rstrip whitespace runs on past the characters the normalizer drops, and single_word looks past them
for a word character (`_dropped_class`). One
difference remains: HF's lstrip / rstrip also take the spaces its normalizer puts around a CJK
character (offsets that then overlap that character's), where this takes the text's own whitespace
only.

A text with no added token in it is tokenized as without them; a tokenizer without added tokens
never runs these ops (`BertTokenizer` skips them).
"""

import numpy as np
import tensorflow as tf

from pipelines.tokenizer.normalize import resolved_strip_accents
from pipelines.tokenizer.unicode_tables import (MAX_CODEPOINT, REMOVE, SPACE, character_expansions,
                                                class_table)

# A byte that never occurs in UTF-8: it marks the matches for `tf.strings.split`.
_MARK = b"\xff"
# Rust's `char::is_whitespace` (Unicode White_Space), what HF's lstrip / rstrip take.
_WHITESPACE = "[\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]"
# Rust regex's Unicode `\w` (HF's single_word check): letters, marks, digits, connector punctuation.
_WORD_CHAR = "[\\pL\\pM\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}]"

# `tf.strings.to_hash_bucket_fast` with this many buckets is the string's 64-bit fingerprint (made non-negative).
_BUCKETS = 2 ** 63 - 1

_FLAGS = ("special", "normalized", "lstrip", "rstrip", "single_word")


# The special tokens of every BERT tokenizer.json: a tokenizer that adds these alone adds nothing.
BERT_SPECIAL_TOKENS = frozenset(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])


class AddedTokenError(ValueError):
    """An added token that cannot be matched: empty, not in the vocabulary, or of a bad form."""


def matched_added_tokens(added_tokens):
    """`added_tokens` (strings or dicts with `"content"`) when one of them is a token of its own, not
    BERT's [PAD] [UNK] [CLS] [SEP] [MASK] ("[E1]", "<ent>"), else []: the added tokens a model matches
    whole. A tokenizer that adds nothing else keeps the original rules (its special tokens written in
    a text are split as google-research splits them).

    >>> matched_added_tokens(["[PAD]", "[CLS]"]), matched_added_tokens(["[CLS]", "[E1]"])
    ([], ['[CLS]', '[E1]'])
    """
    added = list(added_tokens or [])
    contents = [entry if isinstance(entry, str) else entry["content"] for entry in added]
    return added if any(content not in BERT_SPECIAL_TOKENS for content in contents) else []


def never_masked_ids(added_tokens, special_tokens):
    """The ids of `added_tokens` (`BertTokenizer.added_tokens`: dicts with `"id"` and `"special"`) that
    masked-LM pretraining never chooses, as it never chooses [CLS] / [SEP] / [PAD]: the special ones
    (`special=True`, HF's `additional_special_tokens`, which transformers' data collators leave out
    of the masked-LM choice) other than the vocabulary's own `special_tokens` (`SpecialTokens`: [UNK]
    and [MASK] stay as google-research treats them). Any other added token is a word of its own, chosen
    (and masked, whole) like any word.

    >>> from pipelines.tokenizer.vocab import special_tokens_from_vocabulary
    >>> special = special_tokens_from_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[E1]", "<e>"])
    >>> never_masked_ids([{"content": "[UNK]", "id": 1, "special": True},
    ...                   {"content": "[E1]", "id": 5, "special": True},
    ...                   {"content": "<e>", "id": 6, "special": False}], special)
    [5]
    """
    own = {special_tokens.pad, special_tokens.unk, special_tokens.cls, special_tokens.sep, special_tokens.mask}
    return sorted({int(entry["id"]) for entry in added_tokens or ()
                   if entry.get("special") and entry["id"] not in own})


def added_token_specs(added_tokens):
    """The added tokens as plain dicts `{"content", "special", "normalized", "lstrip", "rstrip",
    "single_word"}` with HF's defaults (`normalized = not special`), in the order given: what a saved
    model records (`task.json`, a `.keras` file) and `added_token_entries` gives ids to.

    Args:
        added_tokens: strings (HF's `add_tokens` defaults), dicts (tokenizer.json's `"added_tokens"`
            entries; their `"id"` is not kept: the vocabulary gives it) or objects with those
            attributes (`tokenizers.AddedToken`).

    Raises:
        AddedTokenError: an entry of another type, an empty token or a flag that is not a bool
            (naming it and its position in `added_tokens`).
    """
    specs = []
    for position, given in enumerate(added_tokens):
        if isinstance(given, str):
            given = {"content": given}
        elif not isinstance(given, dict):
            if not isinstance(getattr(given, "content", None), str):
                raise AddedTokenError(f"added_tokens[{position}] is {given!r}: give a string, a dict with "
                                      '"content" (tokenizer.json\'s "added_tokens") or a tokenizers.AddedToken')
            given = {flag: getattr(given, flag) for flag in ("content", *_FLAGS) if hasattr(given, flag)}
        content = given.get("content")
        if not isinstance(content, str) or not content:
            raise AddedTokenError(f'added_tokens[{position}]: "content" must be a non-empty string, not {content!r}')
        special = given.get("special", False)
        spec = {"content": content, "special": special, "normalized": given.get("normalized", not special),
                "lstrip": given.get("lstrip", False), "rstrip": given.get("rstrip", False),
                "single_word": given.get("single_word", False)}
        for flag in _FLAGS:
            if not isinstance(spec[flag], bool):
                raise AddedTokenError(f"added_tokens[{position}] ({content!r}): {flag} must be true or false, "
                                      f"not {spec[flag]!r}")
        specs.append(spec)
    return specs


def added_token_entries(added_tokens, vocabulary):
    """The added tokens as dicts `{"content", "id", "special", "normalized", "lstrip", "rstrip",
    "single_word"}` with HF's defaults (`normalized = not special`), their ids from `vocabulary`.

    Args:
        added_tokens: what `added_token_specs` takes.
        vocabulary: the token list; every added token must be one of its lines.

    Raises:
        AddedTokenError: as `added_token_specs`, or a token that is not in the vocabulary (naming it
            and its position in `added_tokens`).
    """
    index = {}
    for i, token in enumerate(vocabulary):
        index.setdefault(token, i)
    entries = []
    for position, spec in enumerate(added_token_specs(added_tokens)):
        content = spec["content"]
        if content not in index:
            raise AddedTokenError(f"added_tokens[{position}] ({content!r}) is not in the vocabulary: add it as a "
                                  "line of vocab.txt (its line is its id)")
        entries.append({**spec, "id": index[content]})
    return entries


def _fingerprints(keys):
    """The lookup of `keys` (`_find`): their fingerprints sorted, the keys and their indices in that order,
    and how many keys share one fingerprint at most (1 but for a 64-bit collision)."""
    with tf.init_scope():
        prints = tf.strings.to_hash_bucket_fast(tf.constant(keys, tf.string), _BUCKETS).numpy()
    order = np.argsort(prints, kind="stable")
    return {"prints": prints[order], "sorted_keys": np.array([keys[i].encode("utf-8") for i in order], object),
            "order": order.astype(np.int64), "same": int(np.unique(prints, return_counts=True)[1].max())}


def _find(matching, texts):
    """Each of `texts`' index in the pass's keys (-1: none): a hash lookup, checked by string equality,
    so the cost grows with the texts, not with the number of tokens."""
    prints = tf.constant(matching["prints"], tf.int64)
    wanted = tf.strings.to_hash_bucket_fast(texts, _BUCKETS)
    at = tf.searchsorted(prints, wanted, side="left", out_type=tf.int64)
    last = tf.constant(len(matching["prints"]) - 1, tf.int64)
    index = tf.fill(tf.shape(texts, out_type=tf.int64), tf.constant(-1, tf.int64))
    for extra in range(matching["same"]):
        where = tf.minimum(at + extra, last)
        hit = tf.logical_and(tf.equal(tf.gather(prints, where), wanted),
                             tf.equal(tf.gather(tf.constant(matching["sorted_keys"], tf.string), where), texts))
        index = tf.where(tf.logical_and(hit, index < 0), tf.gather(tf.constant(matching["order"]), where), index)
    return index


def _fold_constants(matching):
    """The pass's normalization tables (`unicode_tables.character_expansions`) as constants, once a graph."""
    if not matching["fold"]:
        return None
    slots, splits, values = matching["fold_tables"]
    values = np.asarray(values) if len(values) else np.zeros([1], np.int32)
    return tf.constant(slots), tf.constant(np.asarray(splits, np.int64)), tf.constant(np.asarray(values, np.int32))


def _cleaning_tables(lowercase, strip_accents):
    """`(slots, splits, values)` as `unicode_tables.character_expansions`, for what HF's BERT normalizer
    does to one character before it matches a normalized added token: the characters BERT's cleaning
    drops (control and format characters, U+0000, U+FFFD) become nothing, whitespace a space, the
    others are lowercased and / or stripped of accents as the rules say."""
    if lowercase or strip_accents:
        slots, splits, values = character_expansions(lowercase, strip_accents)
        slots, splits, values = np.array(slots), list(splits), list(values)
    else:
        slots, splits, values = np.full(MAX_CODEPOINT + 1, -1, np.int16), [0], []
    classes = class_table()
    empty = len(splits) - 1
    splits.append(splits[-1])
    slots[classes == REMOVE] = empty
    space = len(splits) - 1
    values.append(ord(" "))
    splits.append(splits[-1] + 1)
    slots[classes == SPACE] = space
    return slots, np.asarray(splits, np.int64), np.asarray(values, np.int32)


def _dropped_class(tables):
    """An RE2 class of the characters `tables` turn into nothing (controls; marks when accents are
    stripped): gone from the text HF's lstrip / rstrip and single_word look at, so a run of whitespace
    goes on past them and a word character is found beyond them."""
    slots, splits, _ = tables
    empty = np.flatnonzero(splits[1:] == splits[:-1])
    dropped = np.isin(slots, empty) & (slots >= 0)
    dropped[0xD800:0xE000] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[0], dropped.astype(np.int8), [0]])))
    ranges = "".join(f"\\x{{{begin:X}}}" + ("" if end - 1 == begin else f"-\\x{{{end - 1:X}}}")
                     for begin, end in zip(edges[::2], edges[1::2]))
    return f"[{ranges}]"


def _fold_text(tables, text):
    """`text` as `_folded` leaves it, in Python (a token's content)."""
    slots, splits, values = tables
    out = []
    for char in text:
        slot = int(slots[ord(char)])
        out.append(char if slot < 0 else "".join(chr(v) for v in values[splits[slot]:splits[slot + 1]]))
    return "".join(out)


def _folded(folding, texts):
    """`texts` as HF's BERT normalizer leaves them (`_cleaning_tables`: cleaned, `str.lower()` and / or NFD
    without Mn marks, character by character, as `BertPreTokenizer`): what a normalized added token is
    matched against."""
    slots, splits, values = folding
    cps = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")
    flat = cps.flat_values
    slot = tf.cast(tf.gather(slots, flat), tf.int64)
    changed = slot >= 0
    slot = tf.maximum(slot, 0)
    start = tf.gather(splits, slot)
    length = tf.where(changed, tf.gather(splits, slot + 1) - start, 1)
    source = tf.repeat(tf.range(tf.size(flat, out_type=tf.int64)), length)
    ends = tf.cumsum(length)
    within = tf.range(tf.reduce_sum(length)) - tf.gather(ends - length, source)
    mapped = tf.gather(values, tf.minimum(tf.gather(start, source) + within, tf.size(values, out_type=tf.int64) - 1))
    out = tf.where(tf.gather(changed, source), mapped, tf.gather(flat, source))
    row_splits = tf.gather(tf.concat([[0], ends], 0), cps.row_splits)
    return tf.strings.unicode_encode(tf.RaggedTensor.from_row_splits(out, row_splits, validate=False), "UTF-8")


class AddedTokenSplitter:
    """Splits strings at their added tokens, as graph ops (core TensorFlow only).

    `split(strings)` gives every string's pieces in order: the text between the matches (to tokenize
    by BERT's rules) and the matches (one id each), with their byte spans in the string.
    """

    def __init__(self, entries, lowercase, strip_accents=None):
        self.entries = list(entries)
        self.passes = []
        strip_accents = resolved_strip_accents(lowercase, strip_accents)
        for normalized in (False, True):
            group = [e for e in self.entries if e["normalized"] == normalized]
            if not group:
                continue
            # HF matches a normalized token in the text its normalizer leaves: controls dropped, whitespace
            # a space, then lowercased and / or accents stripped; the tokens likewise.
            fold = normalized
            fold_tables = _cleaning_tables(lowercase, strip_accents) if fold else None

            def key(content):
                """The token as the normalizer leaves it (cleaned, lowercased, accents stripped), as HF matches it."""
                if not fold:
                    return content
                return _fold_text(fold_tables, content) or content

            by_key = {}
            for entry in group:
                by_key.setdefault(key(entry["content"]), entry)
            # Longest first: at a position the longest token is taken (HF's leftmost-longest).
            ordered = sorted(by_key.values(), key=lambda e: -len(e["content"].encode("utf-8")))
            keys = [key(entry["content"]) for entry in ordered]
            self.passes.append({
                "fold": fold, "keys": keys, "fold_tables": fold_tables,
                "dropped": _dropped_class(fold_tables) if fold else None,
                # the lengths in characters to try at every position: a match has its token's, or its
                # normalized key's (a text's 'café' is 4 characters whatever the token's form)
                "widths": sorted({len(entry["content"]) for entry in ordered} | {len(k) for k in keys}, reverse=True),
                "ids": [entry["id"] for entry in ordered],
                "lstrip": [entry["lstrip"] for entry in ordered],
                "rstrip": [entry["rstrip"] for entry in ordered],
                "single_word": [entry["single_word"] for entry in ordered],
                **_fingerprints(keys),
            })

    def split(self, strings):
        """`(pieces, starts, ids, rows)`, flat and in order: each piece's text, its byte start in its
        string, its added token's id (-1: text to tokenize) and the index of its string. Empty text
        pieces are left out."""
        pieces = strings
        starts = tf.zeros(tf.shape(strings, out_type=tf.int64), tf.int64)
        ids = tf.fill(tf.shape(strings), tf.constant(-1, tf.int64))
        rows = tf.range(tf.size(strings, out_type=tf.int64))
        for matching in self.passes:
            pieces, starts, ids, rows = self._split_pass(matching, pieces, starts, ids, rows)
        keep = tf.logical_or(ids >= 0, tf.strings.length(pieces) > 0)
        return tuple(tf.boolean_mask(t, keep) for t in (pieces, starts, ids, rows))

    def _split_pass(self, matching, pieces, starts, ids, rows):
        """One pass: the text pieces split at this pass's tokens; matched pieces stay as they are."""
        is_text = ids < 0
        # A piece holding the marker byte (not UTF-8) is not searched: the marks would be ambiguous.
        has_mark = tf.strings.split(pieces, sep=_MARK).row_lengths() > 1
        search = tf.logical_and(is_text, tf.logical_not(has_mark))
        marked = self._mark(matching, tf.where(search, pieces, ""))
        parts = tf.strings.split(tf.where(search, marked, pieces), sep=_MARK)
        # Every other part of a searched piece is a match; an unsearched piece is one part.
        owner = parts.value_rowids()
        position = tf.range(tf.size(owner, out_type=tf.int64)) - tf.gather(parts.row_splits, owner)
        matched = tf.logical_and(tf.gather(search, owner), tf.equal(position % 2, 1))
        values = parts.flat_values
        lengths = tf.cast(tf.strings.length(values), tf.int64)
        before = tf.concat([tf.cumsum(lengths, exclusive=True), [tf.reduce_sum(lengths)]], 0)
        offsets = tf.gather(before, tf.range(tf.size(owner, out_type=tf.int64))) - tf.gather(
            before, tf.gather(parts.row_splits, owner))
        part_starts = tf.gather(starts, owner) + offsets
        part_ids = self._match_ids(matching, values, matched)
        part_ids = tf.where(matched, part_ids, tf.gather(ids, owner))
        if any(matching["single_word"]):
            part_ids = self._single_word(matching, values, part_ids, matched, owner)
        if any(matching["lstrip"]) or any(matching["rstrip"]):
            values, part_starts = self._strip(matching, values, part_starts, part_ids, matched, owner)
        part_rows = tf.gather(rows, owner)
        return self._rejoin(values, part_starts, part_ids, part_rows, owner)

    @staticmethod
    def _mark(matching, pieces):
        """Each piece with every match between two marker bytes, as HF's leftmost-longest finds them: the
        longest token (its characters, lowercased for a case-folded pass) at each character is looked up
        by hash, then the matches are taken from the left, each search resuming after the last match."""
        npieces = tf.size(pieces, out_type=tf.int64)
        _, offsets = tf.strings.unicode_decode_with_offsets(pieces, "UTF-8", errors="replace")
        row_splits = offsets.row_splits
        char_rows = offsets.value_rowids()
        nchars = row_splits[-1]
        # the characters' own bytes (an invalid byte is one character, kept as it is)
        piece_bytes = tf.strings.bytes_split(pieces)
        byte_starts = tf.gather(piece_bytes.row_splits, char_rows) + offsets.flat_values
        first = tf.scatter_nd(byte_starts[:, None], tf.ones_like(byte_starts),
                              tf.reshape(piece_bytes.row_splits[-1], [1]))
        chars = tf.strings.unsorted_segment_join(piece_bytes.flat_values, tf.cumsum(first) - 1, nchars)
        chars = tf.RaggedTensor.from_row_splits(chars, row_splits, validate=False)
        # positions: a piece's characters then one past its end (its own), so a piece's path stays in it
        count = nchars + npieces
        position = tf.range(count)
        longest = tf.zeros([count], tf.int64)
        folding = _fold_constants(matching)
        # the characters as the normalizer leaves them (each on its own: zero, one or more characters)
        keyed = chars.with_flat_values(_folded(folding, chars.flat_values)) if matching["fold"] else chars
        # the characters it leaves something of (it drops controls, and accents when it strips them): a
        # match is found among those, its first and last character among them, others between
        kept = tf.strings.length(keyed.flat_values) > 0
        kept_at = tf.reshape(tf.where(kept), [-1])
        keyed = tf.ragged.boolean_mask(keyed, keyed.with_flat_values(kept))
        for width in matching["widths"]:
            grams = tf.strings.ngrams(keyed, width, separator="")
            texts = grams.flat_values
            rows = grams.value_rowids()
            first = tf.gather(keyed.row_splits, rows) + tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(
                grams.row_splits, rows)
            begin, last = tf.gather(kept_at, first), tf.gather(kept_at, first + width - 1)
            found = tf.where(_find(matching, texts) >= 0, last - begin + 1, 0)
            longest = tf.tensor_scatter_nd_max(longest, (begin + rows)[:, None], found)
        ends = row_splits[1:] + tf.range(npieces)
        is_end = tf.scatter_nd(ends[:, None], tf.ones_like(ends), tf.reshape(count, [1])) > 0
        jump = tf.where(is_end, position, position + tf.maximum(longest, 1))
        starts = row_splits[:-1] + tf.range(npieces)
        reached = tf.scatter_nd(starts[:, None], tf.ones_like(starts), tf.reshape(count, [1])) > 0
        longest_piece = tf.reduce_max(tf.concat([row_splits[1:] - row_splits[:-1], [0]], 0))

        def spread(reached, jump, distance):
            """`reached` (what `distance` - 1 jumps or fewer reach from a piece's start) doubled."""
            landed = tf.math.unsorted_segment_max(tf.cast(reached, tf.int32), jump, count) > 0
            return tf.logical_or(reached, landed), tf.gather(jump, jump), distance * 2

        reached, _, _ = tf.while_loop(lambda reached, jump, distance: distance <= longest_piece, spread,
                                      (reached, jump, tf.constant(1, tf.int64)))
        taken = tf.logical_and(reached, longest > 0)
        last = tf.boolean_mask(position + longest - 1, taken)
        closes = tf.scatter_nd(last[:, None], tf.ones_like(last), tf.reshape(count, [1])) > 0
        char_at = tf.range(nchars) + char_rows
        units = tf.strings.join([tf.where(tf.gather(taken, char_at), _MARK, b""), chars.flat_values,
                                 tf.where(tf.gather(closes, char_at), _MARK, b"")])
        return tf.strings.unsorted_segment_join(units, char_rows, npieces)

    def _match_ids(self, matching, values, matched):
        """The id of each matched part (its text: a token's content, as found)."""
        keys = values
        if matching["fold"]:
            keys = _folded(_fold_constants(matching), keys)
        which = _find(matching, keys)
        found = which >= 0
        ids = tf.gather(tf.constant(matching["ids"], tf.int64), tf.maximum(which, 0))
        # Every match is a key (`_mark` found it so); a part that is none stays text.
        return tf.where(tf.logical_and(matched, found), ids, tf.constant(-1, tf.int64))

    def _single_word(self, matching, values, part_ids, matched, owner):
        """Unmatches a single_word token that has a word character right before or after it in its piece."""
        is_single = self._with_flag(matching, "single_word", part_ids, matched)
        count = tf.size(values, out_type=tf.int64)
        index = tf.range(count)

        def neighbour(step):
            """The part `step` away in the same piece, else ''."""
            at = tf.clip_by_value(index + step, 0, tf.maximum(count - 1, 0))
            same = tf.logical_and(tf.equal(at, index + step), tf.equal(tf.gather(owner, at), owner))
            return tf.where(same, tf.gather(values, at), "")

        # Parts between two adjacent matches are empty: the character next to a match may be two parts away.
        before = tf.strings.join([neighbour(-2), neighbour(-1)])
        after = tf.strings.join([neighbour(1), neighbour(2)])
        # a normalized token's neighbours as HF's normalizer leaves them: the characters it drops skipped
        skipped = matching["dropped"] + "*" if matching["fold"] else ""
        word_before = tf.strings.regex_full_match(before, "(?s).*" + _WORD_CHAR + skipped)
        word_after = tf.strings.regex_full_match(after, "(?s)" + skipped + _WORD_CHAR + ".*")
        refused = tf.logical_and(is_single, tf.logical_or(word_before, word_after))
        return tf.where(refused, tf.constant(-1, tf.int64), part_ids)

    @staticmethod
    def _with_flag(matching, flag, part_ids, matched):
        """Whether each part is a (kept) match of a token with `flag` set."""
        flagged = tf.constant(sorted(int(i) for i, f in zip(matching["ids"], matching[flag]) if f) or [-2], tf.int64)
        at = tf.minimum(tf.searchsorted(flagged, part_ids, out_type=tf.int64), tf.size(flagged, out_type=tf.int64) - 1)
        return tf.logical_and(matched, tf.equal(tf.gather(flagged, at), part_ids))

    def _strip(self, matching, values, starts, part_ids, matched, owner):
        """`(values, starts)` with the whitespace an lstrip (rstrip) match takes moved from the text part
        before (after) it into the match, as HF's `find_matches` once the match is chosen: an rstrip
        match's whitespace first, an lstrip one then takes what is left."""
        kept = tf.logical_and(matched, part_ids >= 0)  # a refused single_word match is text
        lstrip = self._with_flag(matching, "lstrip", part_ids, kept)
        rstrip = self._with_flag(matching, "rstrip", part_ids, kept)
        count = tf.size(values, out_type=tf.int64)
        index = tf.range(count)

        def at(flags, step):
            """`flags` of the part `step` away in the same piece (False past its ends)."""
            where = tf.clip_by_value(index + step, 0, tf.maximum(count - 1, 0))
            same = tf.logical_and(tf.equal(where, index + step), tf.equal(tf.gather(owner, where), owner))
            return tf.logical_and(same, tf.gather(flags, where))

        lengths = tf.cast(tf.strings.length(values), tf.int64)
        # a text part: its leading whitespace goes to an rstrip match before it, its trailing to an lstrip one after
        text = tf.logical_not(kept)
        # a normalized token's whitespace runs on past the characters the normalizer drops (not
        # starting with them: the run taken begins and ends at whitespace)
        run = f"(?:{_WHITESPACE}|{matching['dropped']})*" if matching["fold"] else _WHITESPACE + "*"
        leading = lengths - tf.cast(tf.strings.length(tf.strings.regex_replace(values, "^" + run + _WHITESPACE, "")),
                                    tf.int64)
        lead = tf.where(tf.logical_and(text, at(rstrip, -1)), leading, 0)
        rest = tf.strings.substr(values, lead, lengths - lead)
        trailing = lengths - lead - tf.cast(
            tf.strings.length(tf.strings.regex_replace(rest, _WHITESPACE + run + "$", "")), tf.int64)
        trail = tf.where(tf.logical_and(text, at(lstrip, 1)), trailing, 0)

        def of_neighbour(step, amounts):
            where = tf.clip_by_value(index + step, 0, tf.maximum(count - 1, 0))
            return tf.where(at(tf.ones_like(kept), step), tf.gather(amounts, where), 0)

        taken_before = tf.where(lstrip, of_neighbour(-1, trail), 0)  # the previous part's trailing whitespace
        taken_after = tf.where(rstrip, of_neighbour(1, lead), 0)  # the next part's leading whitespace
        before_text = tf.strings.substr(tf.gather(values, tf.maximum(index - 1, 0)),
                                        tf.gather(lengths, tf.maximum(index - 1, 0)) - taken_before, taken_before)
        after_text = tf.strings.substr(tf.gather(values, tf.minimum(index + 1, tf.maximum(count - 1, 0))),
                                       tf.zeros_like(taken_after), taken_after)
        stripped = tf.strings.substr(values, lead, lengths - lead - trail)
        values = tf.where(text, stripped, tf.strings.join([before_text, values, after_text]))
        starts = tf.where(text, starts + lead, starts - taken_before)
        return values, starts

    @staticmethod
    def _rejoin(values, starts, ids, rows, owner):
        """Adjacent text parts of one piece joined back (a refused match is text again)."""
        is_text = ids < 0
        count = tf.size(values, out_type=tf.int64)
        index = tf.range(count)
        previous_text = tf.logical_and(
            index > 0, tf.logical_and(tf.gather(is_text, tf.maximum(index - 1, 0)),
                                      tf.equal(tf.gather(owner, tf.maximum(index - 1, 0)), owner)))
        new_group = tf.logical_not(tf.logical_and(is_text, previous_text))
        group = tf.cumsum(tf.cast(new_group, tf.int64)) - 1
        groups = tf.maximum(tf.reduce_max(tf.concat([group, [-1]], 0)) + 1, 0)
        joined = tf.strings.unsorted_segment_join(values, group, groups)
        first = tf.math.unsorted_segment_min(index, group, groups)
        return joined, tf.gather(starts, first), tf.gather(ids, first), tf.gather(rows, first)
