"""The speculation toggle of ``sgtrace inject-hook``, on the sgtrace side.

* :mod:`~sgtrace.hooks.sites` locates the hook's sites in a release (``locate_sites`` ->
  :class:`~sgtrace.hooks.spec.HookSpec`);
* :mod:`~sgtrace.hooks.apply` writes it: ``generate_runtime_hook`` (``--mode runtime``) and
  ``patch_source`` (``--mode patch``, with :mod:`~sgtrace.hooks.inject`'s codemod);
  :mod:`~sgtrace.hooks.render` assembles the files;
* :mod:`~sgtrace.hooks.policy_config` loads the policy's config, :mod:`~sgtrace.hooks.replay`
  replays it over a trace.

What runs inside SGLang (the hook, the policies, the off step) is :mod:`sgtrace.payload`.
"""
