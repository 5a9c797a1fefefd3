"""Carry the deciding rank's decisions to every tensor-parallel rank, in the scheduler's own
broadcast, so that every rank applies the same decision at the same loop iteration.

A policy that reads a clock cannot run on every rank: each rank times its own steps and would
decide apart, and ranks that launch different states hang in their collectives. So one rank
decides, and the decision travels in data SGLang already sends: every loop iteration the
scheduler of each TP rank receives the new requests, and at TP size > 1 the first rank of the
TP group (the source) broadcasts its list of them to the others with a pickled-object broadcast
looked up in the receiving module's globals. :class:`DecisionCarrier` wraps that broadcast and
the receiving method (through :class:`~.patcher.Patches`, undoable). Which module, class and
method receive is the release's (the config's names, read from its source by the map): a
receiving component from 0.5.13, the scheduler itself before, whose module then also holds
other sites of the hook (each wrap is its own entry; they compose):

* on the source, the broadcast takes the decisions posted since the last broadcast; those that
  toggle, and the very first (so that every rank has a decision in force from the start), ride
  at the end of the list as one :class:`DecisionMarker` (an iteration without a toggle sends
  nothing more than before);
* on every rank, the source included, the marker is stripped from the broadcast's result before
  SGLang sees the list, and at the end of the receiving method the decisions are delivered:
  the source's own (all of them, to record) or the carried toggles (the other ranks);
* at TP size 1 nothing is broadcast: the decisions pass straight through at the same point;
* where the receiving site was not patched (the names do not match the running code), a posted
  decision is delivered at once, as before the carrier;
* on the deciding rank, ``arrive(received)`` is called once an iteration with what it received
  (before the broadcast, on the source; after the receiving method, at TP size 1), so that a
  decision on requests arriving (``Observation.arriving``) posted there travels in the same
  broadcast and is applied in the same iteration, before the newcomers' prefill.

Every rank counts the receiving calls (:attr:`DecisionCarrier.iteration`, one per loop
iteration); the delivery hands the count over, so the records say at which iteration each rank
applied each decision, and ``sgtrace validate`` checks that the ranks agree.

>>> import types
>>> sent = []
>>> def broadcast(data, rank, group=None, src=0):  # a stand-in for the source's broadcast
...     sent.append(list(data))
...     return data
>>> class Receiver:
...     def receive(self):
...         return module.broadcast(["request"], 0, None, src=0)  # looked up as a global
>>> module = types.ModuleType("receiver")
>>> module.Receiver, module.broadcast = Receiver, broadcast
>>> names = types.SimpleNamespace(
...     receiver_class="Receiver", receive_requests="receive", broadcast_requests="broadcast")
>>> delivered = []
>>> carrier = DecisionCarrier(lambda records, iteration: delivered.append((records, iteration)))
>>> carrier.install(Patches(), names, module); carrier.is_patched
True
>>> carrier.engage(replicated=True)
>>> record = DecisionRecord(3, 0, 40, False, True, "measured", 2.5, 0.004)
>>> carrier.post(record)
>>> module.Receiver().receive()  # SGLang sees its own list
['request']
>>> sent[-1][1] == DecisionMarker((record,)), delivered == [((record,), 1)]
(True, True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import SglangNames
from .patcher import Patches
from .record import DecisionRecord

Deliver = Callable[[tuple[DecisionRecord, ...], "int | None"], None]
Arrive = Callable[[Any], None]


@dataclass(frozen=True)
class DecisionMarker:
    """What rides in the broadcast list: the source's toggles since the last broadcast (and
    its very first decision)."""

    records: tuple[DecisionRecord, ...]


class DecisionCarrier:
    """Posts decisions on the deciding rank and delivers them on every rank (module docstring).

    ``deliver(records, iteration)``: the decisions to apply, in order, and the loop iteration
    (None: delivered at once, the receiving site not being patched).
    """

    def __init__(self, deliver: Deliver, arrive: Arrive | None = None) -> None:
        self._deliver = deliver
        self._arrive = arrive
        self._arrived = False  # this iteration's arrivals were shown (on the source)
        self.iteration = 0
        self.is_patched = False
        self.is_relayed = False
        self.is_replicated = False
        self.is_source: bool | None = None  # learnt at the first broadcast
        self._outbox: list[DecisionRecord] = []
        self._received: list[DecisionRecord] = []
        self._has_sent = False

    @property
    def decides(self) -> bool:
        """Whether this rank's policy decides: not a rank that receives the broadcast."""
        return not (self.is_relayed and self.is_replicated and self.is_source is False)

    def engage(self, replicated: bool) -> None:
        """Relay from now on (where patched): ``replicated`` when the TP size is over 1."""
        self.is_replicated = replicated
        self.is_relayed = self.is_patched

    def post(self, record: DecisionRecord) -> None:
        """A decision of this rank's policy: delivered at the next receive, or at once."""
        if self.is_relayed:
            self._outbox.append(record)
        else:
            self._deliver((record,), None)

    def drop_pending(self) -> None:
        """Forget the decisions not sent yet (the deciding hook stopped): none is applied."""
        self._outbox.clear()

    def install(self, patches: Patches, names: SglangNames, module: Any) -> None:
        """Wrap the receiving method and the broadcast global of ``module`` (``names``: the
        receiver's class and method, the broadcast); :attr:`is_patched` says whether it did
        (not where either is missing); once patched, a second call changes nothing."""
        namespace, broadcast = vars(module), names.broadcast_requests
        receive = f"{names.receiver_class}.{names.receive_requests}"
        if self.is_patched or not callable(namespace.get(broadcast)):
            return
        if patches.wrap(module, receive, self.wrap_receive):
            patches.set_item(namespace, broadcast, self.wrap_broadcast(namespace[broadcast]))
            self.is_patched = True

    def wrap_receive(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """The receiving method: count the iteration, then deliver what arrived."""

        @functools.wraps(original)
        def receive(*args: Any, **kwargs: Any) -> Any:
            self.iteration += 1
            self._arrived = False
            out = original(*args, **kwargs)
            if not self._arrived and self.is_relayed and self.decides:
                self.show_arrivals(out)
            self.finish_receive()
            return out

        return receive

    def show_arrivals(self, received: Any) -> None:
        """Hand what this rank received to ``arrive`` (once an iteration)."""
        self._arrived = True
        if self._arrive is not None:
            self._arrive(received)

    def finish_receive(self) -> None:
        """Deliver this iteration's decisions: carried ones, or at TP size 1 the posted ones
        (nothing where this rank does not relay: what arrived is dropped, never kept)."""
        if self.is_relayed and not self.is_replicated:
            self._received, self._outbox = self._outbox, []
        records, self._received = tuple(self._received), []
        if records and self.is_relayed:
            self._deliver(records, self.iteration)

    def wrap_broadcast(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """The broadcast of the received requests: append the marker on the source, strip it
        from the result on every rank."""

        @functools.wraps(original)
        def broadcast(data: Any, rank: Any, *args: Any, **kwargs: Any) -> Any:
            src = kwargs.get("src", args[1] if len(args) > 1 else 0)
            is_source = rank == src
            if self.is_source is None:
                self.is_source = is_source
            if is_source and self.is_relayed and not self._arrived and isinstance(data, list):
                self.show_arrivals(data)  # a decision on them rides in this broadcast
            if is_source and self.is_relayed and isinstance(data, list) and self._outbox:
                sent, self._outbox = self._outbox, []
                self._received.extend(sent)
                first, self._has_sent = not self._has_sent, True
                toggles = tuple(r for i, r in enumerate(sent) if r.changed or (first and i == 0))
                if toggles:
                    data = [*data, DecisionMarker(toggles)]
            out = original(data, rank, *args, **kwargs)
            if isinstance(out, list) and any(isinstance(item, DecisionMarker) for item in out):
                if not is_source:
                    for item in out:
                        if isinstance(item, DecisionMarker):
                            self._received.extend(item.records)
                out = [item for item in out if not isinstance(item, DecisionMarker)]
            return out

        return broadcast
