"""The resolution rules, one scenario each, stated edge by edge.

For every golden case (``cases/<scenario>/``) the edges the rule must produce (with their
``how``) and the edges its negative twin must NOT produce. The golden files pin the whole
output; these tables say which part of it is the point, so a wrongly accepted golden file fails
here with the input, the expectation and the actual edges printed.
"""

from __future__ import annotations

import pytest

from tests.graphs.golden import Case, all_cases
from tests.graphs.helpers import Expect, assert_edges, assert_unresolved, expect
from tests.graphs.test_valueflow import FLOW_EXPECTED
from tests.graphs.test_values import VALUE_EXPECTED

EXPECTED: dict[str, Expect] = {
    "import_alias": expect(
        {("app.main:run", "app.util:helper", "import")},
        {("app.main:run", "app.util:unused")},
    ),
    "import_alias_binds_only_alias": expect(
        {("app.main:run", "app.util:helper", "import")},
        {("app.main:run", "app.other:assist")},
    ),
    "import_relative": expect(
        {
            ("app.engine.core:run", "app.engine.steps:prepare", "import"),
            ("app.engine.core:run", "app.common:log", "import"),
            ("app.engine.core:run", "app.engine.steps:finish", "import"),
        }
    ),
    "import_relative_stays_in_package": expect(
        {("app.alpha.run:go", "app.alpha.util:work", "import")},
        {("app.alpha.run:go", "app.beta.util:work")},
    ),
    "import_type_checking": expect(
        {
            ("app.host:drive", "app.worker:Worker.step", "annotation"),
            ("app.host:drive_quoted", "app.worker:Worker.step", "annotation"),
        }
    ),
    "import_type_checking_needs_annotation": expect(
        set(), {("app.host:drive", "app.worker:Worker.step")}
    ),
    "import_reexport": expect(
        {
            ("app.cli:main", "app.impl.worker:Worker", "import"),
            ("app.cli:main", "app.impl.worker:Worker.run", "import"),
            ("app.cli:main", "app.impl.worker:make_worker", "import"),
        }
    ),
    "import_reexport_not_same_name_elsewhere": expect(
        {("app.cli:main", "app.impl:Worker.run", "import")},
        {("app.cli:main", "app.legacy:Worker.run"), ("app.cli:main", "app.legacy:Worker")},
    ),
    "class_call_links_init": expect(
        {
            ("app.main:build", "app.base:Base.__init__", "import"),
            ("app.main:build", "app.models:Own.__init__", "import"),
            ("app.main:build", "app.models:Plain", "import"),
            ("app.models:Own.__init__", "app.base:Base.__init__", "super"),
        }
    ),
    "instance_call_not_init": expect(
        {
            ("app.main:score", "app.models:Scorer.__init__"),
            ("app.main:score", "app.models:Scorer.__call__", "import"),
            ("app.main:score", "app.models:Plain.__init__"),
        },
    ),
    "method_via_mro": expect(
        {
            ("app.leaf:Leaf.run", "app.right:Right.step", "mro"),
            ("app.leaf:Leaf.run", "app.left:Left.hello", "mro"),
            ("app.leaf:Leaf.describe", "app.right:Right.describe", "super"),
            ("app.right:Right.step", "app.base:Base.step", "super"),
            ("app.leaf:Leaf.build", "app.base:Base.create", "mro"),
        },
        {
            ("app.leaf:Leaf.run", "app.base:Base.step"),
            ("app.leaf:Leaf.describe", "app.base:Base.describe"),
        },
    ),
    "method_via_self_not_by_bare_name": expect(
        {("app.a:A.run", "app.a:A.check", "mro"), ("app.b:B.run", "app.b:B.verify", "mro")},
        {("app.a:A.run", "app.b:B.verify")},
    ),
    "mixin_self_annotation": expect(
        {
            ("app.mixins.load:LoadMixin.load", "app.mixins.save:SaveMixin.save", "annotation"),
            ("app.mixins.load:LoadMixin.load", "app.host:Host.report", "annotation"),
        }
    ),
    "mixin_not_linked_to_unrelated_class": expect(
        {("app.mixins:LoadMixin.load", "app.mixins:SaveMixin.save", "subclass")},
        {("app.mixins:LoadMixin.load", "app.mixins:OtherSaveMixin.save")},
    ),
    "attr_from_constructor": expect(
        {
            ("app.car:Car.drive", "app.parts:Engine.start", "attribute-type"),
            ("app.car:Car.drive", "app.parts:Radio.tune", "attribute-type"),
        },
        {("app.car:Car.drive", "app.parts:Turbine.start")},
    ),
    "attr_not_from_unrelated_class": expect(
        set(), {("app.car:Boat.sail", "app.parts:Engine.start")}
    ),
    "attr_from_param_and_alias": expect(
        {
            ("app.cache:Cache.lookup", "app.store:Store.get", "attribute-type"),
            ("app.cache:Cache.lookup", "app.store:Store.put", "attribute-type"),
        }
    ),
    "attr_from_unannotated_param_unresolved": expect(
        set(),
        {
            ("app.cache:Cache.lookup", "app.store:Store.get"),
            ("app.cache:make_cache", "app.store:Store"),
        },
    ),
    "attr_from_class_annotation": expect(
        {("app.scheduler:Scheduler.submit", "app.queue:Queue.push", "annotation")}
    ),
    "attr_container_annotation_unresolved": expect(
        set(), {("app.scheduler:Scheduler.submit", "app.queue:Queue.push")}
    ),
    "property_returns_attribute": expect(
        {
            ("app.spec:SpecRunner.step", "app.workers:Model.forward", "property"),
            ("app.spec:SpecRunner.step", "app.workers:FastWorker.run", "property"),
        },
        {
            ("app.spec:SpecRunner.step", "app.workers:SlowWorker.run"),
            ("app.spec:SpecRunner.step", "app.workers:BaseWorker.run"),
        },
    ),
    "property_refinement_stays_in_subclass": expect(
        {
            ("app.runners:FastRunner.go", "app.workers:FastWorker.run", "property"),
            ("app.runners:Runner.step", "app.workers:BaseWorker.run", "property"),
        },
        {
            ("app.runners:FastRunner.go", "app.workers:SlowWorker.run"),
            ("app.runners:Runner.step", "app.workers:FastWorker.run"),
            ("app.runners:Runner.step", "app.workers:SlowWorker.run"),
        },
    ),
    "attr_several_types": expect(
        {
            ("app.layer:Layer.forward", "app.backends:FlashBackend.attend", "attribute-type"),
            ("app.layer:Layer.forward", "app.backends:TritonBackend.attend", "attribute-type"),
        },
        {("app.layer:Layer.forward", "app.backends:TorchBackend.attend")},
    ),
    "attr_types_per_class": expect(
        {
            ("app.layers:FlashLayer.forward", "app.backends:FlashBackend.attend"),
            ("app.layers:TritonLayer.forward", "app.backends:TritonBackend.attend"),
        },
        {
            ("app.layers:FlashLayer.forward", "app.backends:TritonBackend.attend"),
            ("app.layers:TritonLayer.forward", "app.backends:FlashBackend.attend"),
        },
    ),
    "attr_abstract_refined": expect(
        {("app.runner:Runner.step", "app.workers:FastWorker.run", "attribute-type")},
        {
            ("app.runner:Runner.step", "app.workers:BaseWorker.run"),
            ("app.runner:Runner.step", "app.workers:SlowWorker.run"),
        },
    ),
    "attr_abstract_declared_only": expect(
        {
            ("app.runner:Runner.step", "app.workers:BaseWorker.run", "annotation"),
            ("app.runner:Runner.step", "app.workers:FastWorker.run", "override"),
            ("app.runner:Runner.step", "app.workers:SlowWorker.run", "override"),
        }
    ),
    "abstract_method_overriders": expect(
        {
            ("app.base:Backend.step", "app.base:Backend.execute", "mro"),
            ("app.base:Backend.step", "app.cuda:CudaBackend.execute", "override"),
            ("app.base:Backend.step", "app.cpu:CpuBackend.execute", "override"),
            ("app.base:Backend.step", "app.cpu:PinnedCpuBackend.execute", "override"),
            ("app.base:Backend.step", "app.base:Backend.prepare", "mro"),
            ("app.base:Backend.step", "app.cuda:CudaBackend.prepare", "override"),
        }
    ),
    "concrete_method_no_overriders": expect(
        {("app.base:Backend.step", "app.base:Backend.execute", "mro")},
        {("app.base:Backend.step", "app.cuda:CudaBackend.execute")},
    ),
    "factory_returns_classes": expect(
        {
            ("app.server:serve", "app.registry:create_worker", "import"),
            ("app.server:serve", "app.workers:EagleWorker.__init__", "factory"),
            ("app.server:serve", "app.workers:NgramWorker.__init__", "factory"),
            ("app.server:serve", "app.workers:EagleWorker.generate", "factory"),
            ("app.server:serve", "app.workers:NgramWorker.generate", "factory"),
        },
        {("app.server:serve", "app.workers:StandaloneWorker.generate")},
    ),
    "factory_returns_instance_not_class": expect(
        {
            ("app.server:serve", "app.workers:EagleWorker.generate", "import"),
            ("app.server:serve", "app.workers:EagleWorker.__call__", "import"),
        },
        {("app.server:serve", "app.workers:EagleWorker.__init__")},
    ),
    "decorators_transparent": expect(
        {
            ("app.model:main", "app.wrappers:logged.<locals>.wrapper", "decorator"),
            ("app.wrappers:logged.<locals>.wrapper", "app.model:predict", "decorator"),
            ("app.wrappers:logged.<locals>.wrapper", "app.model:Model.prepare", "decorator"),
            ("app.model:main", "app.model:Model.load", "local"),
            ("app.model:main", "app.model:Model.forward", "local"),
            ("app.model:Model.forward", "app.wrappers:logged.<locals>.wrapper", "decorator"),
            ("app.model:Model.prepare", "app.model:Model.normalize", "local"),
            ("app.model:Model.load", "app.model:Model.normalize", "mro"),
            ("app.model:<module>", "app.wrappers:logged", "decorator"),
            ("app.model:Model", "app.wrappers:logged", "decorator"),
        },
        {
            ("app.model:predict", "app.wrappers:logged"),
            ("app.model:Model.prepare", "app.wrappers:logged"),
            ("app.model:main", "app.model:predict"),
            ("app.model:Model.forward", "app.model:Model.prepare"),
        },
    ),
    "decorator_calls_in_defining_scope": expect(
        {
            ("app.handlers:<module>", "app.registry:register", "import"),
            ("app.handlers:Service", "app.registry:register", "import"),
            ("app.handlers:Service.stop", "app.handlers:ping", "local"),
        },
        {
            ("app.handlers:ping", "app.registry:register"),
            ("app.handlers:Service.stop", "app.registry:register"),
        },
    ),
    "closure_nested_function": expect(
        {
            ("app.pipeline:build", "app.pipeline:build.<locals>.apply", "closure"),
            ("app.pipeline:build", "app.pipeline:build.<locals>.Collector", "closure"),
            ("app.pipeline:build.<locals>.apply", "app.pipeline:build.<locals>.scale", "closure"),
            (
                "app.pipeline:build.<locals>.Collector.add",
                "app.pipeline:build.<locals>.apply",
                "closure",
            ),
        },
        {("app.pipeline:build.<locals>.apply", "app.pipeline:scale")},
    ),
    "nested_function_not_visible_outside": expect(
        {("app.pipeline:build", "app.pipeline:build.<locals>.helper", "closure")},
        {("app.pipeline:other", "app.pipeline:build.<locals>.helper")},
    ),
    "unresolved_calls_counted": expect(
        {("app.worker:Worker.step", "torch.cuda:synchronize", "external")}
    ),
}

# The unresolved calls a negative twin exists to show: exactly these, with their reason.
UNRESOLVED: dict[str, list[tuple[int, str, str, str]]] = {
    "import_alias_binds_only_alias": [(6, "app.main:run", "helper", "unknown-name")],
    "import_type_checking_needs_annotation": [(8, "app.host:drive", "worker.step", "unknown-type")],
    "instance_call_not_init": [(8, "app.main:score", "plain", "no-member")],
    "method_via_self_not_by_bare_name": [(3, "app.a:A.run", "self.verify", "no-member")],
    "attr_not_from_unrelated_class": [(11, "app.car:Boat.sail", "self.engine.start", "no-member")],
    "attr_from_unannotated_param_unresolved": [
        (9, "app.cache:Cache.lookup", "self.store.get", "unknown-type"),
    ],
    "attr_container_annotation_unresolved": [
        (11, "app.scheduler:Scheduler.submit", "self.queues.push", "builtin"),
        (12, "app.scheduler:Scheduler.submit", "self.by_name.push", "builtin"),
    ],
    "nested_function_not_visible_outside": [(9, "app.pipeline:other", "helper", "unknown-name")],
    "unresolved_calls_counted": [
        (9, "app.worker:Worker.step", "self.model.forward", "unknown-type"),
        (10, "app.worker:Worker.step", "batch.prepare", "unknown-type"),
        (11, "app.worker:Worker.step", "len", "builtin"),
        (13, "app.worker:Worker.step", "handlers[...]", "dynamic"),
        (14, "app.worker:Worker.step", "undefined_function", "unknown-name"),
        (15, "app.worker:Worker.step", "self.missing", "no-member"),
    ],
}

CASES = {c.name: c for c in all_cases()}


def test_every_case_has_expectations() -> None:
    """Each case states its rule, here or (values followed as data) in ``test_values.py`` and
    ``test_valueflow.py``."""
    assert sorted({*EXPECTED, *VALUE_EXPECTED, *FLOW_EXPECTED}) == sorted(CASES)
    assert len(EXPECTED) + len(VALUE_EXPECTED) + len(FLOW_EXPECTED) == len(CASES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rule(name: str) -> None:
    case: Case = CASES[name]
    graph = case.graph()
    rule = EXPECTED[name]
    assert_edges(graph, rule.present, rule.absent, input_text=case.input_text())


@pytest.mark.parametrize("name", sorted(UNRESOLVED))
def test_unresolved_with_reason(name: str) -> None:
    case = CASES[name]
    assert_unresolved(case.graph(), UNRESOLVED[name], input_text=case.input_text())


def test_unresolved_calls_are_counted_by_reason() -> None:
    graph = CASES["unresolved_calls_counted"].graph()
    assert [(s.line, str(s.callee), s.how) for s in graph.sites] == [
        (12, "torch.cuda:synchronize", "external")
    ]
    assert graph.nodes[graph.sites[0].callee].kind == "external"
    assert graph.unresolved_counts() == {
        "builtin": 1,
        "dynamic": 1,
        "no-member": 1,
        "unknown-name": 1,
        "unknown-type": 2,
    }
