"""A bounded least-recently-used map for per-process caches.

What such a cache holds is only a cache: the data it was built from is in the store (or in the
configuration), so an entry dropped here is built again when it is next needed. Standard library
only: imported by the core and the adapters alike.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class LRU(Generic[K, V]):
    """At most `capacity` entries; setting one more drops the least recently used (a read with
    `get` or a write counts as a use; `in` and `peek` do not). `on_evict(key, value)` is told of
    each entry dropped for room (not of `pop` or `clear`). `capacity` may be changed at any time;
    a smaller one drops entries at once."""

    __slots__ = ("_capacity", "_data", "evictions", "on_evict")

    def __init__(self, capacity: int, on_evict: Callable[[K, V], None] | None = None) -> None:
        if capacity < 1:
            raise ValueError("an LRU holds at least one entry")
        self._capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()
        self.on_evict = on_evict
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        if value < 1:
            raise ValueError("an LRU holds at least one entry")
        self._capacity = value
        self._trim()

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        try:
            value = self._data[key]
        except KeyError:
            return default
        self._data.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The entry without counting it as a use."""
        return self._data.get(key)

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        self._trim()

    def pop(self, key: K, default: V | None = None) -> V | None:
        return self._data.pop(key, default)

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._data))

    def values(self) -> list[V]:
        return list(self._data.values())

    def clear(self) -> None:
        self._data.clear()

    def _trim(self) -> None:
        while len(self._data) > self._capacity:
            key, value = self._data.popitem(last=False)
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key, value)
