"""The lifetime protocol of the objects that own C resources, written once.

close() frees what the object owns, idempotently (each class implements it); ``with obj:``
closes at the end of the block (exceptions propagate). Objects that own a C handle directly
(Model, Session, the chat template and output parser) also close when garbage-collected;
Llama does not, since the Model and Session it hands out may outlive it (they close
themselves when they are collected)."""

from __future__ import annotations


class Closing:
    """Mixin: the context manager over the subclass's close()."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Closeable(Closing):
    """Mixin: Closing, and close() when garbage-collected. Never raises from __del__: an object
    whose __init__ failed half-way has nothing to close, and at interpreter shutdown the
    library may already be gone."""

    __slots__ = ()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
