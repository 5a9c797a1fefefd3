"""The speculation toggle of ``sgtrace inject-hook``.

* :mod:`~sgtrace.hooks.sites` locates the hook's sites in a release (``locate_sites`` ->
  :class:`~sgtrace.hooks.spec.HookSpec`);
* :mod:`~sgtrace.hooks.apply` writes it: ``generate_runtime_hook`` (``--mode runtime``) and
  ``patch_source`` (``--mode patch``, with :mod:`~sgtrace.hooks.inject`'s codemod);
* :mod:`~sgtrace.hooks.policy` decides, :mod:`~sgtrace.hooks.policy_config` loads its config;
* ``runtime_hook``, ``policy`` and ``import_patch`` are stdlib-only modules copied verbatim into
  what runs inside SGLang (:mod:`~sgtrace.hooks.render` assembles those files).
"""
