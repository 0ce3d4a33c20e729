"""Features of a FunctionGraph: callbacks, History, Validator, ReplaceValidate, NodeFinder."""

import io
import pickle

import numpy as np
import pytest
from toy import Add, Neg, ToyType, add, cast, constant, float64_matrix, mul, neg, split

from opgraph.graph.features import (
    AlreadyThere,
    Bookkeeper,
    Feature,
    History,
    InconsistencyError,
    NodeFinder,
    PreserveNames,
    PreserveVariableAttributes,
    PrintListener,
    ReplacementDidntRemovedError,
    ReplaceValidate,
    Validator,
)
from opgraph.graph.fg import FunctionGraph


class Recorder(Feature):
    """Records every callback as a tuple of printable things."""

    def __init__(self, name="rec", log=None):
        self.name = name
        self.log = [] if log is None else log

    def on_attach(self, fgraph):
        self.log.append((self.name, "attach"))

    def on_detach(self, fgraph):
        self.log.append((self.name, "detach"))

    def on_import(self, fgraph, node, reason):
        self.log.append((self.name, "import", str(node), reason))

    def on_prune(self, fgraph, node, reason):
        self.log.append((self.name, "prune", str(node), reason))

    def on_change_input(self, fgraph, node, i, var, new_var, reason=None):
        self.log.append((self.name, "change", str(node), i, str(var), str(new_var), reason))


def _xy():
    return float64_matrix("x"), float64_matrix("y")


def test_callbacks_in_order_from_construction_to_replace():
    x, y = _xy()
    rec = Recorder()
    fg = FunctionGraph([x, y], [add(neg(x), y)], features=[rec])
    assert rec.log == [
        ("rec", "attach"),
        ("rec", "import", "Neg(x)", "init"),
        ("rec", "import", "Add(Neg.0, y)", "init"),
    ]
    rec.log.clear()
    fx, fy = fg.inputs
    node = fg.outputs[0].owner
    fg.replace(node.inputs[0], mul(fy, fx), reason="swap")
    assert rec.log == [
        ("rec", "import", "Mul(y, x)", "swap"),
        ("rec", "prune", "Neg(x)", "swap"),
        ("rec", "change", "Add(Mul.0, y)", 0, "Neg.0", "Mul.0", "swap"),
    ]
    rec.log.clear()
    fg.replace(fg.outputs[0], fy, reason="out")
    assert rec.log == [
        ("rec", "prune", "Add(Mul.0, y)", "out"),
        ("rec", "prune", "Mul(y, x)", "out"),
        ("rec", "change", "output", 0, "Add.0", "y", "out"),
    ]
    fg.remove_feature(rec)
    assert rec.log[-1] == ("rec", "detach")
    n = len(rec.log)
    fg.replace(fy, neg(fx))
    assert len(rec.log) == n


def test_features_are_called_in_attachment_order():
    x, y = _xy()
    log = []
    a, b = Recorder("a", log), Recorder("b", log)
    fg = FunctionGraph([x, y], [add(x, y)], features=[a, b])
    log.clear()
    fg.replace(fg.inputs[1], neg(fg.inputs[0]))
    assert [e[:2] for e in log] == [
        ("a", "import"),
        ("b", "import"),
        ("a", "change"),
        ("b", "change"),
    ]
    assert fg.features[0].__class__ is ReplaceValidate and fg.features[1:] == [a, b]


def test_attach_twice_or_already_there_is_skipped():
    x, _ = _xy()
    rec = Recorder()
    fg = FunctionGraph([x], [neg(x)], features=[rec])
    fg.attach_feature(rec)
    assert rec.log.count(("rec", "attach")) == 1

    class Once(Feature):
        def on_attach(self, fgraph):
            if any(isinstance(f, Once) for f in fgraph.features):
                raise AlreadyThere("one is enough")

    first, second = Once(), Once()
    fg.attach_feature(first)
    fg.attach_feature(second)
    assert first in fg.features and second not in fg.features
    fg.attach_feature(Validator())  # ReplaceValidate is a Validator already
    assert sum(isinstance(f, Validator) for f in fg.features) == 1
    fg.attach_feature(History())  # ReplaceValidate is a History already
    assert sum(isinstance(f, History) for f in fg.features) == 1
    fg.remove_feature(Once())  # not attached: nothing happens


def test_default_callbacks_are_skipped_and_duck_typed_features_work():
    x, _ = _xy()
    calls = []

    class Duck:
        def on_import(self, fgraph, node, reason):
            calls.append(node)

    fg = FunctionGraph([x], [neg(x)], features=[Duck(), Feature()])
    assert len(calls) == 1
    assert [f for f, _ in fg._callbacks_for("on_import")][-1].__class__ is Duck
    assert not any(type(f) is Feature for f, _ in fg._callbacks_for("on_import"))
    assert fg._callbacks_for("on_prune") == []  # only no-op defaults define it
    assert set(fg.execute_callbacks_times) == set(fg.features)


def test_collect_callbacks_and_orderings():
    x, _ = _xy()
    a, b = neg(x), mul(x, x)
    fg = FunctionGraph([x], [add(a, b)])
    fa, fb = (fg.outputs[0].owner.inputs[k].owner for k in (0, 1))
    assert fg.toposort()[:2] == [fb, fa]  # Theano's order: the last input first

    class AFirst(Feature):
        def orderings(self, fgraph):
            return {fb: [fa]}

    feature = AFirst()
    fg.attach_feature(feature)  # invalidates the cached order
    assert fg.orderings() == {fb: [fa]}
    assert fg.toposort()[:2] == [fa, fb]
    assert fg.collect_callbacks("orderings") == {feature: {fb: [fa]}}
    fg.remove_feature(feature)
    assert fg.toposort()[:2] == [fb, fa]

    class Bad(Feature):
        def orderings(self, fgraph):
            return [(fa, fb)]

    fg.attach_feature(Bad())
    with pytest.raises(TypeError, match="must return a dict"):
        fg.toposort()


def test_bookkeeper_sees_existing_nodes():
    x, _ = _xy()
    fg = FunctionGraph([x], [neg(neg(x))])
    seen = []

    class Keeper(Bookkeeper):
        def on_import(self, fgraph, node, reason):
            seen.append(("import", node, reason))

        def on_prune(self, fgraph, node, reason):
            seen.append(("prune", node, reason))

    keeper = Keeper()
    fg.attach_feature(keeper)
    topo = fg.toposort()
    assert seen == [("import", n, "on_attach") for n in topo]
    seen.clear()
    fg.remove_feature(keeper)
    assert [(e[0], e[1]) for e in seen] == [("prune", n) for n in reversed(topo)]


# ---------------------------------------------------------------- History


def test_history_revert_restores_the_graph():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(neg(x), y), mul(x, y)])
    fx, fy = fg.inputs
    before = str(fg)
    nodes_before = set(fg.apply_nodes)
    clients_before = {v: list(v.clients) for v in fg.variables}
    chk = fg.checkpoint()
    fg.replace(fg.outputs[0].owner.inputs[0], fy)
    fg.replace(fy, add(fx, fx))
    fg.replace(fg.outputs[1], fx)
    assert str(fg) != before
    fg.revert(chk)
    assert str(fg) == before
    assert fg.apply_nodes == nodes_before  # the very same nodes come back
    assert {v: sorted(map(str, v.clients)) for v in fg.variables} == {
        v: sorted(map(str, c)) for v, c in clients_before.items()
    }
    fg.check_integrity()
    fg.revert(chk)  # nothing left to undo
    assert str(fg) == before


def test_history_on_a_second_graph_and_detach():
    x, _ = _xy()
    history = History()
    fg1 = FunctionGraph([x], [neg(x)])
    fg2 = FunctionGraph([x], [neg(x)])
    fg1.remove_feature(fg1.features[0])
    assert not hasattr(fg1, "checkpoint") and not hasattr(fg1, "replace_validate")
    fg1.attach_feature(history)
    chk = fg1.checkpoint()
    fg1.replace(fg1.inputs[0], mul(fg1.inputs[0], fg1.inputs[0]))
    fg1.revert(chk)
    assert str(fg1) == str(fg2)
    fg1.remove_feature(history)
    assert not hasattr(fg1, "checkpoint") and fg1 not in history.history


def test_pickled_graph_keeps_working_history():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(x, y)], features=[NodeFinder(), PreserveNames()])
    fg.replace(fg.inputs[1], neg(fg.inputs[0]))
    fg2 = pickle.loads(pickle.dumps(fg))
    assert fg2.features[0].history[fg2] == []  # the record is not pickled
    chk = fg2.checkpoint()
    fg2.replace(fg2.inputs[0], fg2.inputs[1])
    assert str(fg2) == "FunctionGraph(Add(y, Neg(y)))"
    fg2.revert(chk)
    assert str(fg2) == str(fg)
    assert len(fg2.get_nodes(neg)) == 1 and fg2.get_nodes(neg)[0] in fg2.apply_nodes
    fg2.check_integrity()


# ---------------------------------------------------------------- Validator / ReplaceValidate


class NoMul(Feature):
    """Refuses any graph containing a Mul node."""

    def validate(self, fgraph):
        for node in fgraph.apply_nodes:
            if node.op == mul:
                raise InconsistencyError(f"no Mul allowed: {node}")


def test_validate_and_consistent():
    x, _ = _xy()
    fg = FunctionGraph([x], [mul(x, x)])
    assert fg.consistent()
    fg.validate()
    fg.attach_feature(NoMul())
    assert not fg.consistent()
    with pytest.raises(InconsistencyError, match="no Mul"):
        fg.validate()


def test_replace_validate_reverts_on_inconsistency():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(neg(x), y)], features=[NoMul()])
    fx, fy = fg.inputs
    before = str(fg)
    with pytest.raises(InconsistencyError, match="no Mul"):
        fg.replace_validate(fy, mul(fx, fx), reason="bad")
    assert str(fg) == before
    fg.check_integrity()
    fg.replace_validate(fy, neg(fy), reason="good")
    assert str(fg) == "FunctionGraph(Add(Neg(x), Neg(y)))"
    fg.check_integrity()


def test_replace_all_validate_reverts_every_pair():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(neg(x), y)])
    fx, fy = fg.inputs
    before = str(fg)
    with pytest.raises(TypeError, match="float32"):
        fg.replace_all_validate([(fy, neg(fx)), (fx, cast(fy, "float32"))], reason="r")
    assert str(fg) == before
    fg.attach_feature(NoMul())
    with pytest.raises(InconsistencyError):
        fg.replace_all_validate([(fy, neg(fx)), (fx, mul(fy, fy))])
    assert str(fg) == before
    chk = fg.replace_all_validate([(fy, neg(fx))])
    assert isinstance(chk, int) and str(fg) == "FunctionGraph(Add(Neg(x), Neg(x)))"
    fg.check_integrity()


def test_replace_all_validate_verbose(capsys):
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(x, y)], features=[NoMul()])
    fx, fy = fg.inputs
    fg.replace_all_validate([(fy, neg(fx))], reason="why", verbose=True)
    assert "why y Neg.0" in capsys.readouterr().out
    with pytest.raises(InconsistencyError):
        fg.replace_all_validate([(fx, mul(fx, fx))], reason="nope", verbose=True)
    assert "validate failed" in capsys.readouterr().out


def test_replace_all_validate_remove(caplog):
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(neg(x), y)])
    fx, fy = fg.inputs
    neg_node = fg.outputs[0].owner.inputs[0].owner
    before = str(fg)
    with pytest.raises(ReplacementDidntRemovedError):
        fg.replace_all_validate_remove([(fy, fx)], remove=[neg_node], reason="keepsneg")
    assert str(fg) == before and "keepsneg" in caplog.text
    fg.replace_all_validate_remove([(neg_node.outputs[0], fy)], remove=[neg_node])
    assert str(fg) == "FunctionGraph(Add(y, y))"
    fg.check_integrity()


# ---------------------------------------------------------------- NodeFinder and friends


def test_node_finder_by_op_and_class():
    x, y = _xy()
    finder = NodeFinder()
    p, n = split(x)
    fg = FunctionGraph([x, y], [add(neg(p), neg(n), mul(x, y))], features=[finder])
    assert len(fg.get_nodes(neg)) == 2 and all(nd.op == neg for nd in fg.get_nodes(neg))
    assert fg.get_nodes(Neg) == fg.get_nodes(neg)
    assert len(fg.get_nodes(Add)) == 1 and fg.get_nodes(add) == fg.get_nodes(Add)
    assert fg.get_nodes(cast(x, "float32").owner.op) == []
    from opgraph.graph.op import Op

    assert set(fg.get_nodes(Op)) == fg.apply_nodes
    first_neg = fg.get_nodes(neg)[0]
    fg.replace(first_neg.outputs[0], fg.inputs[1])
    assert fg.get_nodes(neg) == [nd for nd in fg.apply_nodes if nd.op == neg]
    assert len(fg.get_nodes(neg)) == 1
    fg.attach_feature(NodeFinder())  # one is enough
    assert sum(isinstance(f, NodeFinder) for f in fg.features) == 1
    fg.remove_feature(finder)
    assert not hasattr(fg, "get_nodes")


def test_node_finder_with_unhashable_op():
    class Unhashable(Neg):
        __hash__ = None

    x, _ = _xy()
    op = Unhashable()
    fg = FunctionGraph([x], [op(x)], features=[NodeFinder()])
    assert len(fg.get_nodes(Unhashable)) == 1
    with pytest.raises(TypeError, match="unhashable"):
        fg.get_nodes(op)
    fg.replace(fg.outputs[0], fg.inputs[0])
    assert fg.get_nodes(Unhashable) == []


def test_preserve_names_and_attributes():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(x, y)], features=[PreserveVariableAttributes()])
    fx, fy = fg.inputs
    fg.outputs[0].name = "total"
    fg.outputs[0].tag.values_eq_approx = np.allclose
    new = mul(fx, fy)
    fg.replace(fg.outputs[0], new)
    assert new.name == "total" and new.tag.values_eq_approx is np.allclose
    named = neg(fx)
    named.name = "keep"
    fg.replace(new, named)
    assert named.name == "keep"
    fg2 = FunctionGraph([x, y], [add(x, y)], features=[PreserveNames()])
    fg2.replace(fg2.inputs[1], neg(fg2.inputs[0]))
    assert fg2.outputs[0].owner.inputs[1].name == "y"


def test_print_listener():
    x, _ = _xy()
    out = io.StringIO()
    fg = FunctionGraph([x], [neg(x)], features=[PrintListener(file=out)])
    fg.replace(fg.outputs[0], fg.inputs[0], reason="r")
    text = out.getvalue()
    assert "-- attaching to:" in text and "-- importing: Neg(x) reason: init" in text
    assert "-- pruning: Neg(x) reason: r" in text and "-- changing (output.inputs[0])" in text
    quiet = io.StringIO()
    FunctionGraph([x], [neg(x)], features=[PrintListener(active=False, file=quiet)])
    assert quiet.getvalue() == ""


def test_disown_detaches_features():
    x, _ = _xy()
    rec = Recorder()
    fg = FunctionGraph([x], [neg(constant(np.ones((2, 2))))], features=[rec])
    fg.disown()
    assert rec.log[-1] == ("rec", "detach")
    assert not fg.apply_nodes and not fg.variables and fg.features == []


def test_feature_sees_import_of_a_new_type():
    vec = ToyType("float64", 1)
    v = vec("v")
    rec = Recorder()
    fg = FunctionGraph([v], [neg(v)], features=[rec])
    assert rec.log[1][1] == "import"
    assert fg.outputs[0].type == vec
