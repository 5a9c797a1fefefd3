"""Just enough of ``torch`` for the lean off step's tests: 1-D and 2-D tensors on lists.

Our own small stand-in (CI has no torch); it implements only what ``sgtrace.payload.offstep`` and
the fake upstream functions of ``test_offstep.py`` call.
"""

from __future__ import annotations

import types

int32, int64, float32, bfloat16 = "int32", "int64", "float32", "bfloat16"
long = int64


class Tensor:
    def __init__(self, rows, dtype=int64):
        self.rows = rows  # a list of numbers (1-D) or of lists (2-D)
        self.dtype = dtype
        self.is_cuda = True

    @property
    def shape(self):
        if self.rows and isinstance(self.rows[0], list):
            return (len(self.rows), len(self.rows[0]))
        return (len(self.rows),)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, key):
        if isinstance(key, Tensor):  # a gather of rows
            return Tensor([_copy([self.rows[i]])[0] for i in key.rows], self.dtype)
        return Tensor(self.rows[key], self.dtype)

    def __setitem__(self, key, value):
        assert isinstance(key, Tensor)  # a scatter of rows
        for i, row in zip(key.rows, _copy(value.rows), strict=True):
            self.rows[i] = row

    def record_stream(self, stream):
        self.streams = [*getattr(self, "streams", []), stream]

    def flat(self):
        return [x for row in self.rows for x in row] if len(self.shape) == 2 else list(self.rows)

    def to(self, dtype):
        return Tensor(_copy(self.rows), dtype)

    def clone(self):
        return Tensor(_copy(self.rows), self.dtype)

    def unsqueeze(self, dim):
        assert dim == 1
        return Tensor([[x] for x in self.rows], self.dtype)

    def reshape(self, *shape):
        flat = self.flat()
        if shape in ((-1,), (len(flat),)):
            return Tensor(flat, self.dtype)
        rows, cols = shape
        return Tensor([flat[i * cols : (i + 1) * cols] for i in range(rows)], self.dtype)

    def copy_(self, other):
        self.rows[:] = _copy(other.rows)
        return self

    def fill_(self, value):
        self.rows[:] = [value] * len(self.rows)
        return self

    def __add__(self, other):
        return Tensor([x + other for x in self.rows], self.dtype)


def _copy(rows):
    return [list(r) if isinstance(r, list) else r for r in rows]


def _filled(shape, value, dtype):
    if isinstance(shape, int):
        shape = (shape,)
    if len(shape) == 1:
        return Tensor([value] * shape[0], dtype)
    return Tensor([[value] * shape[1] for _ in range(shape[0])], dtype)


def zeros(shape, dtype=float32, device=None):
    return _filled(shape, 0, dtype)


def ones(shape, dtype=float32, device=None):
    return _filled(shape, 1, dtype)


def full(shape, value, dtype=int64, device=None):
    return _filled(shape, value, dtype)


def empty_like(t, dtype=None):
    return _filled(t.shape, 0, dtype or t.dtype)


def arange(n, dtype=int64, device=None):
    return Tensor(list(range(n)), dtype)


def argmax(t, dim=-1):
    return Tensor([max(range(len(row)), key=row.__getitem__) for row in t.rows], int64)


def equal(a, b):
    return a.shape == b.shape and a.rows == b.rows


def get_device_module(device=None):
    return types.SimpleNamespace(current_stream=lambda: "stream")


def module() -> types.ModuleType:
    """A module object named ``torch`` with this file's API."""
    fake = types.ModuleType("torch")
    for name in (
        "Tensor zeros ones full empty_like arange argmax equal get_device_module int32 int64 long "
        "float32 bfloat16"
    ).split():
        setattr(fake, name, globals()[name])
    return fake
