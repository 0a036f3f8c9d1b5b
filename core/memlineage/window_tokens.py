"""Token counting for the working memory: tiktoken encodings shipped with MemLineage (never downloaded).

Re-exported by :mod:`memlineage.window`.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlineage.errors import ConfigurationError

if TYPE_CHECKING:  # type names only: tiktoken is heavy and imported at run time on first use
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "count_tokens", "fit_to_budget", "get_encoding"]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
"""Default tiktoken encoding (GPT-4o / o-series family)."""

_CACHE_DIR = Path(__file__).parent / "_static" / "tiktoken_cache"

#: encoding name -> its rank file (named ``sha1(source URL)`` as tiktoken names its cache entries), the file's
#: sha256, and the encoding's split pattern and special tokens, taken from ``tiktoken_ext.openai_public`` when the
#: files were added (see ``_static/tiktoken_cache/README.md``).
_SHIPPED_ENCODINGS: dict[str, dict[str, Any]] = json.loads((_CACHE_DIR / "encodings.json").read_text(encoding="utf-8"))

_ENCODING_LOCK = threading.Lock()
_ENCODINGS: dict[str, tiktoken.Encoding] = {}


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return a tiktoken encoding loaded from the files shipped with MemLineage (never from the network).

    The file's sha256 is checked, then ``TIKTOKEN_CACHE_DIR`` is pointed at the shipped directory for the
    duration of the load only (under a lock) and restored afterwards. Loaded encodings are cached per process.

    Args:
        name: ``"cl100k_base"`` or ``"o200k_base"`` (default).

    Returns:
        The ``tiktoken.Encoding``.

    Raises:
        ConfigurationError: ``name`` is not a shipped encoding, or a shipped file is missing or corrupt (the
            message says how to repair the installation).
    """
    enc = _ENCODINGS.get(name)
    if enc is not None:
        return enc
    if name not in _SHIPPED_ENCODINGS:
        msg = f"unknown encoding {name!r}; MemLineage ships {sorted(_SHIPPED_ENCODINGS)} for offline counting"
        raise ConfigurationError(msg)
    with _ENCODING_LOCK:
        enc = _ENCODINGS.get(name)
        if enc is not None:
            return enc
        spec = _SHIPPED_ENCODINGS[name]
        path = _CACHE_DIR / spec["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            msg = f"tiktoken file for {name} is missing at {path}; reinstall memlineage"
            raise ConfigurationError(msg) from exc
        if hashlib.sha256(data).hexdigest() != spec["sha256"]:
            msg = f"tiktoken file for {name} at {path} fails its sha256 check; reinstall memlineage"
            raise ConfigurationError(msg)
        import tiktoken  # lazy: keeps `import memlineage` fast

        # the rank file is "<base64 token> <rank>" per line; built here, so nothing is read from (or written to)
        # tiktoken's cache directory and the process environment is left alone
        ranks = {
            base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)
        }
        enc = tiktoken.Encoding(
            name, pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens=dict(spec["special_tokens"])
        )
        _ENCODINGS[name] = enc
        logger.debug("loaded tiktoken encoding %s from %s", name, _CACHE_DIR)
        return enc


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Count the tokens of ``text``; special-token strings (``<|endoftext|>``) count as plain text.

    Args:
        text: The text, in any language (CJK included).
        encoding: Shipped encoding name (see :func:`get_encoding`).

    Returns:
        Number of tokens, >= 0.
    """
    if not text:
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


def decode_prefix(enc: tiktoken.Encoding, tokens: Sequence[int], n: int) -> str:
    """The text of the first ``n`` tokens, cut at a character boundary (never a U+FFFD replacement character).

    A token can hold part of a character's UTF-8 bytes (CJK, emoji): the bytes of an incomplete last character
    are left out, so the text may hold slightly fewer than ``n`` tokens, never more.
    """
    if n <= 0:
        return ""
    data = enc.decode_bytes(list(tokens[:n]))
    return codecs.getincrementaldecoder("utf-8")(errors="strict").decode(data, final=False)


def fit_to_budget(lines: Sequence[str], max_tokens: int, encoding: str = DEFAULT_ENCODING) -> list[str]:
    """The leading lines that fit ``max_tokens`` together (one token per line break), in order.

    The first line that does not fit whole is cut to what is left, with an ellipsis, if at least a few tokens are
    left; the lines after it are dropped. Used for memory notes put into a prompt.

    Args:
        lines: Lines, most important first.
        max_tokens: Budget in tokens, >= 1.
        encoding: Shipped encoding name.

    Returns:
        The lines kept (the last one possibly cut).

    Example:
        >>> fit_to_budget(["header", "a short line", "word " * 500], 20)[-1].endswith("…")
        True
    """
    enc = get_encoding(encoding)
    out: list[str] = []
    left = max_tokens
    for line in lines:
        tokens = enc.encode_ordinary(line)
        cost = len(tokens) + (1 if out else 0)
        if cost <= left:
            out.append(line)
            left -= cost
            continue
        room = left - (2 if out else 1)  # the line break and the ellipsis
        if room >= 4:
            out.append(decode_prefix(enc, tokens, room).rstrip() + "…")
        break
    return out
