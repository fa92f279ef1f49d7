"""A prefix cache of session snapshots, for Llama (llama-cpp-python's LlamaRAMCache, made
exact by geist's snapshots).

Keys are token prefixes, values snapshot images of a session that has prefilled exactly that
prefix. A completion restores the longest usable cached prefix of its prompt and prefills only
the rest. With a cache, prompts are prefilled in blocks of `block` tokens at fixed positions
(0..block, block..2*block, ..., the last block up to the prompt's end) and only states at block
boundaries (or a whole prompt, for the same prompt again) are cached, so a completion's tokens
and logits are the same bits whatever the cache holds or held: a restored prefix is exactly
the state those blocks compute. (A one-shot prefill, as without a cache, may differ from the
blockwise one in the last bits of the logits.)

What is cached per prompt: the state at its last block boundary (a longer prompt that extends
it, the next turn of a chat, restarts there), the whole prompt, and the last block boundary
inside the beginning it shares with an earlier prompt (two requests on one system prompt: the
third starts after the system prompt). Works the same for hybrid recurrent models, whose state
cannot be truncated back to a prefix.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class PrefixCache:
    """LRU cache of snapshot images by token prefix, at most `capacity_bytes` of images.
    min_common: the shortest shared beginning (in tokens) worth caching on its own."""

    def __init__(self, capacity_bytes: int = 2 << 30, block: int = 64):
        if int(block) < 1:
            raise ValueError("block must be at least 1 token")
        self.capacity_bytes = int(capacity_bytes)
        self.block = int(block)
        self._entries: "OrderedDict[tuple, bytes]" = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def cache_size(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, tokens) -> bool:
        return tuple(tokens) in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def put(self, tokens, image: bytes) -> None:
        key = tuple(tokens)
        with self._lock:
            self._entries[key] = bytes(image)
            self._entries.move_to_end(key)
            total = sum(len(v) for v in self._entries.values())
            while total > self.capacity_bytes and len(self._entries) > 1:
                _, old = self._entries.popitem(last=False)
                total -= len(old)

    def lookup(self, tokens) -> tuple[tuple, bytes | None, int]:
        """(the longest usable cached prefix of tokens: one ending at a block boundary, or all
        of tokens; its image or None; the longest beginning tokens share with any key)."""
        tokens = tuple(tokens)
        best, image, common = (), None, 0
        with self._lock:
            for key, img in self._entries.items():
                n = _common_len(key, tokens)
                common = max(common, n)
                usable = n == len(key) and (n % self.block == 0 or n == len(tokens))
                if usable and n > len(best):
                    best, image = key, img
            if image is not None:
                self._entries.move_to_end(best)
                self.hits += 1
            else:
                self.misses += 1
        return best, image, common


def _common_len(a: tuple, b: tuple) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
