"""The texts of the speculation hook: its stdlib-only modules and JSON config. Pure.

The modules are copied verbatim from this package (:data:`SOURCES`). Where they go and how they
find each other depends on the delivery (:class:`Delivery`):

* ``runtime``: top-level modules ``sgtrace_hook``, ``sgtrace_hook_policy``,
  ``sgtrace_hook_offstep`` and ``sgtrace_hook_imports`` in the bootstrap directory; its
  ``sitecustomize`` installs the hook (see :mod:`sgtrace.bootstrap`), which patches SGLang
  through the import hook;
* ``patch``: ``sglang/sgtrace_hook.py``, ``sglang/sgtrace_hook_policy.py`` and
  ``sglang/sgtrace_hook_offstep.py``, called by the patched SGLang modules.

>>> 'def install(config_path: str)' in module_source(HOOK_MODULE)
True
"""

from __future__ import annotations

import json
from enum import Enum
from importlib import resources
from typing import Protocol

from sgtrace.bootstrap import BootPlugin
from sgtrace.hooks.spec import HookSpec

HOOK_MODULE = "sgtrace_hook"
POLICY_MODULE = "sgtrace_hook_policy"
IMPORTS_MODULE = "sgtrace_hook_imports"
OFFSTEP_MODULE = "sgtrace_hook_offstep"
PLUGIN_NAME = "sgtrace-hook"
# module name in the hook's files -> the sgtrace.hooks module copied verbatim under that name
SOURCES = {
    HOOK_MODULE: "runtime_hook",
    POLICY_MODULE: "policy",
    IMPORTS_MODULE: "import_patch",
    OFFSTEP_MODULE: "offstep",
}


class Delivery(Enum):
    """How the hook reaches SGLang's processes."""

    RUNTIME = "runtime"
    PATCH = "patch"


class PolicyConfigLike(Protocol):
    """What the hook needs of ``sgtrace.hooks.policy.PolicyConfig``."""

    def to_dict(self) -> dict[str, object]: ...


def module_source(name: str) -> str:
    """The text of the stdlib-only module shipped as ``name`` (see :data:`SOURCES`)."""
    return resources.files("sgtrace.hooks").joinpath(f"{SOURCES[name]}.py").read_text("utf-8")


def hook_config(spec: HookSpec, policy: PolicyConfigLike, delivery: Delivery, package: str) -> str:
    """The JSON config the runtime module reads: sites, family, policy, delivery, modules."""
    prefix = "" if delivery is Delivery.RUNTIME else f"{package}."
    config = {
        **spec.runtime_config(),
        "delivery": delivery.value,
        "policy_module": prefix + POLICY_MODULE,
        "offstep_module": prefix + OFFSTEP_MODULE,
        "patcher_module": IMPORTS_MODULE if delivery is Delivery.RUNTIME else None,
        "policy": policy.to_dict(),
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def hook_files(
    spec: HookSpec, policy: PolicyConfigLike, delivery: Delivery, package: str
) -> dict[str, str]:
    """``{file name: text}`` of the hook, for a bootstrap directory or for ``package/``.

    The import patcher ships only with the runtime mode: a patched source calls the hook itself.
    """
    modules = [HOOK_MODULE, POLICY_MODULE, OFFSTEP_MODULE]
    if delivery is Delivery.RUNTIME:
        modules.append(IMPORTS_MODULE)
    files = {f"{name}.py": module_source(name) for name in modules}
    files[f"{HOOK_MODULE}.json"] = hook_config(spec, policy, delivery, package)
    return files


def boot_plugin(spec: HookSpec, policy: PolicyConfigLike) -> tuple[BootPlugin, dict[str, str]]:
    """The bootstrap plugin of ``--mode runtime`` and the extra files it needs beside it."""
    files = hook_files(spec, policy, Delivery.RUNTIME, "")
    source, config = files.pop(f"{HOOK_MODULE}.py"), files.pop(f"{HOOK_MODULE}.json")
    return BootPlugin(PLUGIN_NAME, HOOK_MODULE, source, config), files
