"""The hook's stand-in for upstream's ``AdaptiveController`` on one ``EAGLEWorkerV2``.

From SGLang 0.5.14 the worker asks its ``adaptive_controller`` which runtime state to run before
each decode launch (``activate_step_by_batch``), and its ``init_cuda_graphs`` has the controller
build extra states at start-up (``register``, ``init_states``). The hook's controller builds the
zero-step state there (its verify attended as a decode, :mod:`.fastverify`) and applies the
decided one before launch. A fault while switching never reaches SGLang: it is reported to the
hook, which keeps the mode the worker is in and stops deciding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .config import OffKernel, SglangNames
from .fastverify import verify_as_decode

OnFault = Callable[[str, Exception], None]


class ToggleController:
    """Holds the runtime states (``on_steps`` and 0) and applies ``target_steps`` before launch."""

    def __init__(
        self,
        worker: Any,
        off_kernel: OffKernel,
        logger: logging.Logger,
        on_fault: OnFault,
        names: SglangNames,
    ) -> None:
        self.worker = worker
        self._names = names
        self.on_steps: int = worker.speculative_num_steps
        self.target_steps = self.on_steps
        self.states: dict[int, Any] = {}
        self._off_kernel = off_kernel
        self._log = logger
        self._on_fault = on_fault

    def register(self, state: Any, steps: int | None = None) -> None:
        self.states[state.speculative_num_steps if steps is None else steps] = state

    def init_states(self, cuda_graph_bs: list[int] | None = None) -> None:
        if 0 in self.states:
            return
        names = self._names
        runner = getattr(getattr(self.worker, names.target_worker, None), names.runner_slot, None)
        fast = self._off_kernel is OffKernel.DECODE
        try:
            with verify_as_decode(runner if fast else None, names) as switched:
                self.states[0] = getattr(self.worker, names.build_state)(
                    speculative_num_steps=0,
                    speculative_num_draft_tokens=1,
                    cuda_graph_bs=cuda_graph_bs,
                )
        except Exception as exc:  # the worker keeps its launch state (upstream restores it)
            self._log.error("sgtrace-hook: no zero-step state (%r); speculation stays on", exc)
            return
        self._log.info(
            "sgtrace-hook zero-step state built; its one-token verify attention: %s",
            "; ".join(switched)
            if switched
            else f"as upstream builds it (off_kernel={self._off_kernel.value})",
        )

    @property
    def can_switch(self) -> bool:
        return 0 in self.states

    def hold(self) -> None:
        """Keep the state the worker runs now, whatever was decided."""
        self.target_steps = self.worker.speculative_num_steps

    def on_verify_complete(
        self, num_correct_drafts_per_req: list[int], batch_size: int = 0
    ) -> None:
        """Ignored: decisions are taken at the decode-result site, from every rank's facts."""

    def activate_step_by_batch(self, batch_size: int) -> None:
        target = self.target_steps
        if target == self.worker.speculative_num_steps or target not in self.states:
            return
        try:
            getattr(self.worker, self._names.apply_state)(self.states[target])
        except Exception as exc:  # never take the server down: keep the state it runs
            self.hold()
            self._on_fault(self._names.apply_state, exc)
