"""The code sgtrace runs inside SGLang's processes: stdlib only, relative imports only.

This package is copied, as the package ``sgtrace_payload``, into a bootstrap directory
(``inject-hook --mode runtime``, ``trace``) or into SGLang's own package (``--mode patch``). It
never imports the rest of sgtrace nor anything outside the standard library, so it runs in any
Python that runs SGLang; the import contract in ``pyproject.toml`` and
``tests/payload/test_imports.py`` hold it to that.

* :mod:`.boot`: run from ``sitecustomize``; installs the plugins listed in the manifest.
* :mod:`.registry`: the one record of what is installed in this process.
* :mod:`.patcher`: patches applied to modules when they are imported, and their undo.
* :mod:`.hook`, :mod:`.plainoff`, :mod:`.plainsites`, :mod:`.carry`: the speculation hook, its
  off state (the scheduler's plain decode path) and the carrier of decisions across ranks.
* :mod:`.policy` and :mod:`.policies`: when speculation runs; :mod:`.record`: what was decided.
* :mod:`.recorder`, :mod:`.backends`, :mod:`.tracer`, :mod:`.deepdive`: the tracer.
"""
