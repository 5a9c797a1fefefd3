"""Qualified names of Python functions, written ``module:Qual.name``.

The ``module:qualname`` form is the one :func:`pkgutil.resolve_name` accepts. It keeps the
boundary between the module path and the qualified name inside the module visible, which a
dotted join (``pkg.mod.Class.func``) hides.

>>> name = QualName.parse("sglang.srt.managers.scheduler:Scheduler.run_batch")
>>> name.module, name.qualname
('sglang.srt.managers.scheduler', 'Scheduler.run_batch')
>>> str(name)
'sglang.srt.managers.scheduler:Scheduler.run_batch'
"""

from __future__ import annotations

from dataclasses import dataclass

from sgtrace.errors import NameSyntaxError

MODULE_LEVEL = "<module>"


@dataclass(frozen=True, order=True)
class QualName:
    """A function, class or module-level code block: ``module:Qual.name``."""

    module: str
    qualname: str

    @classmethod
    def parse(cls, text: str) -> QualName:
        """Parse ``module:Qual.name``; raise :class:`NameSyntaxError` on anything else."""
        module, sep, qualname = text.strip().partition(":")
        if not sep or not module or not qualname or ":" in qualname:
            raise NameSyntaxError(
                f"{text!r} is not a qualified name; write it as module:Qual.name, "
                "for example sglang.srt.managers.scheduler:Scheduler.run_batch"
            )
        return cls(module, qualname)

    @classmethod
    def module_level(cls, module: str) -> QualName:
        """The code at module level of ``module``: ``module:<module>``."""
        return cls(module, MODULE_LEVEL)

    def child(self, name: str) -> QualName:
        """The member ``name`` of this class or function (``A`` -> ``A.name``)."""
        if self.qualname == MODULE_LEVEL:
            return QualName(self.module, name)
        return QualName(self.module, f"{self.qualname}.{name}")

    def local(self, name: str) -> QualName:
        """A function defined inside this function: ``f`` -> ``f.<locals>.name``."""
        if self.qualname == MODULE_LEVEL:
            return QualName(self.module, name)
        return QualName(self.module, f"{self.qualname}.<locals>.{name}")

    @property
    def short(self) -> str:
        """The last component of the qualified name (``run_batch``)."""
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def owner(self) -> QualName | None:
        """The enclosing class or function, or ``None`` at module level."""
        head, sep, _ = self.qualname.rpartition(".")
        if not sep:
            return None
        head = head.removesuffix(".<locals>")
        return QualName(self.module, head)

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"
