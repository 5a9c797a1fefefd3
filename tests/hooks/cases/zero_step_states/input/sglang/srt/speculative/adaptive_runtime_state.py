"""Upstream's adaptive controller (``--speculative-adaptive``), reduced to its protocol (toy):
it switches to the zero-step state at 32 requests and more."""

from __future__ import annotations


class AdaptiveController:
    def __init__(self, worker) -> None:
        self.worker = worker
        self.states = {}

    def register(self, state, steps=None) -> None:
        self.states[state.speculative_num_steps if steps is None else steps] = state

    def init_states(self, cuda_graph_bs=None) -> None:
        for steps in (0, 1):
            self.states[steps] = self.worker.build_adaptive_runtime_state(steps, steps + 1)

    def activate_step_by_batch(self, batch_size: int) -> None:
        steps = 0 if batch_size >= 32 else self.worker.server_args.speculative_num_steps
        if steps in self.states:
            self.worker.apply_runtime_state(self.states[steps])
