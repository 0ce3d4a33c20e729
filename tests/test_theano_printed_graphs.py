"""Compiled graphs print as Theano 1.0.5 printed the same programs (golden values).

Each case compiles one small Theano program with the default mode and compares
``debugprint`` with what Theano 1.0.5 printed for it (recorded by running the program under
Theano, numpy 1.19): fused Composites with their constants as inputs in Theano's order and
scalar ops by Theano's names (``GT``, ``Abs``, ``Switch``), nodes made in place by class
(``Elemwise{Exp}[(0, 0)]``), toposort indices, a mean's divisor as
``Composite{(i0 / Cast{float64}(i1))}``, named outputs (``'argmax'``, ``'x.T'``), ``T.min`` as
``Reduce{minimum}``, the fused cross-entropy over Theano's zero bias.
"""

from __future__ import annotations

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T

x, y = T.dvector("x"), T.dvector("y")
m, n = T.dmatrix("m"), T.dmatrix("n")
s, i, fm = T.dscalar("s"), T.ivector("i"), T.fmatrix("fm")
W = theano.shared(np.zeros((3, 4)), name="W")
bb = theano.shared(np.zeros(4), name="bb")

#: name -> (inputs, output, Theano 1.0.5's debugprint of the compiled function)
CASES = {
    "scale": (
        lambda: ([x], x * 2 + 1),
        (
            "Elemwise{Composite{(i0 + (i1 * i2))}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 1.0} [id B]\n"
            " |TensorConstant{(1,) of 2.0} [id C]\n"
            " |x [id D]\n"
        ),
    ),
    "exp_minus_x": (
        lambda: ([x], T.exp(x) * 2.5 - x),
        (
            "Elemwise{Composite{((i0 * exp(i1)) - i1)}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 2.5} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "comparisons_abs_switch": (
        lambda: ([x, y], (x > y) * T.abs_(x) + T.switch(x < 0, x, y)),
        (
            "Elemwise{Composite{((GT(i0, i1) * Abs(i0)) + Switch(LT(i0, i2), i0, i1))}} [id A] ''   0\n"
            " |x [id B]\n"
            " |y [id C]\n"
            " |TensorConstant{(1,) of 0} [id D]\n"
        ),
    ),
    "shared_subexpression": (
        lambda: ([x, y], T.exp(x) * y + T.exp(x)),
        ("Elemwise{Composite{((exp(i0) * i1) + exp(i0))}} [id A] ''   0\n |x [id B]\n |y [id C]\n"),
    ),
    "sigmoid_sum": (
        lambda: ([m], T.nnet.sigmoid(m).sum()),
        ("Sum{acc_dtype=float64} [id A] ''   1\n |sigmoid [id B] ''   0\n   |m [id C]\n"),
    ),
    "softmax": (
        lambda: ([m], T.nnet.softmax(m)),
        ("Softmax [id A] ''   0\n |m [id B]\n"),
    ),
    "mean": (
        lambda: ([x], x.mean()),
        (
            "Elemwise{Composite{(i0 / Cast{float64}(i1))}}[(0, 0)] [id A] 'mean'   2\n"
            " |Sum{acc_dtype=float64} [id B] ''   1\n"
            " | |x [id C]\n"
            " |Shape_i{0} [id D] ''   0\n"
            "   |x [id C]\n"
        ),
    ),
    "dot_plus_one": (
        lambda: ([m, n], T.dot(m, n) + 1),
        (
            "Elemwise{Add}[(0, 1)] [id A] ''   1\n"
            " |TensorConstant{(1, 1) of 1.0} [id B]\n"
            " |Dot22 [id C] ''   0\n"
            "   |m [id D]\n"
            "   |n [id E]\n"
        ),
    ),
    "tanh_layer": (
        lambda: ([m, n, x], T.tanh(T.dot(m, n) + x)),
        (
            "Elemwise{Composite{tanh((i0 + i1))}}[(0, 0)] [id A] ''   2\n"
            " |Dot22 [id B] ''   1\n"
            " | |m [id C]\n"
            " | |n [id D]\n"
            " |InplaceDimShuffle{x,0} [id E] ''   0\n"
            "   |x [id F]\n"
        ),
    ),
    "sum_of_squares": (
        lambda: ([x], (x**2).sum()),
        (
            "Sum{acc_dtype=float64} [id A] ''   1\n"
            " |Elemwise{sqr,no_inplace} [id B] ''   0\n"
            "   |x [id C]\n"
        ),
    ),
    "isnan_or_isinf": (
        lambda: ([x], T.isnan(x) | T.isinf(x)),
        ("Elemwise{Composite{OR(IsNan(i0), IsInf(i0))}} [id A] ''   0\n |x [id B]\n"),
    ),
    "grad_of_squares": (
        lambda: ([x], T.grad((x**2).sum(), x)),
        (
            "Elemwise{mul,no_inplace} [id A] ''   0\n"
            " |TensorConstant{(1,) of 2.0} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "grad_exp_times_y": (
        lambda: ([x, y], T.grad((T.exp(x) * y).sum(), x)),
        ("Elemwise{Composite{(i0 * exp(i1))}} [id A] ''   0\n |y [id B]\n |x [id C]\n"),
    ),
    "scalar_expression": (
        lambda: ([s], s * 2 + T.log(s)),
        (
            "Elemwise{Composite{((i0 * i1) + log(i1))}} [id A] ''   0\n"
            " |TensorConstant{2.0} [id B]\n"
            " |s [id C]\n"
        ),
    ),
    "argmax": (
        lambda: ([m], T.argmax(m, axis=1)),
        ("Argmax{axis=(1,)} [id A] 'argmax'   0\n |m [id B]\n"),
    ),
    "inc_subtensor": (
        lambda: ([x, i], T.inc_subtensor(x[i], 1.0)),
        (
            "AdvancedIncSubtensor1{no_inplace,inc} [id A] ''   0\n"
            " |x [id B]\n"
            " |TensorConstant{1.0} [id C]\n"
            " |i [id D]\n"
        ),
    ),
    "differences": (
        lambda: ([x], x[1:] - x[:-1]),
        (
            "Elemwise{sub,no_inplace} [id A] ''   2\n"
            " |Subtensor{int64::} [id B] ''   1\n"
            " | |x [id C]\n"
            " | |Constant{1} [id D]\n"
            " |Subtensor{:int64:} [id E] ''   0\n"
            "   |x [id C]\n"
            "   |Constant{-1} [id F]\n"
        ),
    ),
    "clip": (
        lambda: ([x], T.clip(x, 0, 1)),
        (
            "Elemwise{clip,no_inplace} [id A] ''   0\n"
            " |x [id B]\n"
            " |TensorConstant{(1,) of 0} [id C]\n"
            " |TensorConstant{(1,) of 1} [id D]\n"
        ),
    ),
    "exp_in_place": (
        lambda: ([m, n], T.exp(T.dot(m, n))),
        (
            "Elemwise{Exp}[(0, 0)] [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            "   |m [id C]\n"
            "   |n [id D]\n"
        ),
    ),
    "sigmoid_in_place": (
        lambda: ([m, n], T.nnet.sigmoid(T.dot(m, n))),
        (
            "Elemwise{ScalarSigmoid}[(0, 0)] [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            "   |m [id C]\n"
            "   |n [id D]\n"
        ),
    ),
    "softplus_in_place": (
        lambda: ([m, n], T.nnet.softplus(T.dot(m, n))),
        (
            "Elemwise{ScalarSoftplus}[(0, 0)] [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            "   |m [id C]\n"
            "   |n [id D]\n"
        ),
    ),
    "tanh_in_place": (
        lambda: ([m, n], T.tanh(T.dot(m, n))),
        (
            "Elemwise{Tanh}[(0, 0)] [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            "   |m [id C]\n"
            "   |n [id D]\n"
        ),
    ),
    "dot22scalar": (
        lambda: ([m, n], T.dot(m, n) * 2),
        ("Dot22Scalar [id A] ''   0\n |m [id B]\n |n [id C]\n |TensorConstant{2.0} [id D]\n"),
    ),
    "cast": (
        lambda: ([fm], T.cast(T.dot(fm, fm), "float64")),
        (
            "Elemwise{Cast{float64}} [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            "   |fm [id C]\n"
            "   |fm [id C]\n"
        ),
    ),
    "compare": (
        lambda: ([m, n], T.dot(m, n) > 0),
        (
            "Elemwise{gt,no_inplace} [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            " | |m [id C]\n"
            " | |n [id D]\n"
            " |TensorConstant{(1, 1) of 0} [id E]\n"
        ),
    ),
    "switch_in_place": (
        lambda: ([m, n], T.switch(T.dot(m, n) > 0, T.dot(m, n), 0)),
        (
            "Elemwise{Composite{Switch(GT(i0, i1), i0, i1)}}[(0, 0)] [id A] ''   1\n"
            " |Dot22 [id B] ''   0\n"
            " | |m [id C]\n"
            " | |n [id D]\n"
            " |TensorConstant{(1, 1) of 0} [id E]\n"
        ),
    ),
    "relu": (
        lambda: ([m, n], T.nnet.relu(T.dot(m, n))),
        (
            "Elemwise{Composite{(i0 * (i1 + Abs(i1)))}}[(0, 1)] [id A] ''   1\n"
            " |TensorConstant{(1, 1) of 0.5} [id B]\n"
            " |Dot22 [id C] ''   0\n"
            "   |m [id D]\n"
            "   |n [id E]\n"
        ),
    ),
    "variance": (
        lambda: ([m], m.var(axis=0)),
        (
            "Elemwise{TrueDiv}[(0, 0)] [id A] 'var'   9\n"
            " |Sum{axis=[0], acc_dtype=float64} [id B] ''   8\n"
            " | |Elemwise{Composite{sqr((i0 - i1))}} [id C] ''   7\n"
            " |   |m [id D]\n"
            " |   |Elemwise{TrueDiv}[(0, 0)] [id E] 'mean'   6\n"
            " |     |InplaceDimShuffle{x,0} [id F] ''   3\n"
            " |     | |Sum{axis=[0], acc_dtype=float64} [id G] ''   1\n"
            " |     |   |m [id D]\n"
            " |     |InplaceDimShuffle{x,x} [id H] ''   5\n"
            " |       |Elemwise{Cast{float64}} [id I] ''   2\n"
            " |         |Shape_i{0} [id J] ''   0\n"
            " |           |m [id D]\n"
            " |InplaceDimShuffle{x} [id K] ''   4\n"
            "   |Elemwise{Cast{float64}} [id I] ''   2\n"
        ),
    ),
    "maximum_with_zero": (
        lambda: ([m], T.maximum(m, 0)),
        (
            "Elemwise{maximum,no_inplace} [id A] ''   0\n"
            " |m [id B]\n"
            " |TensorConstant{(1, 1) of 0.0} [id C]\n"
        ),
    ),
    "power_and_sqrt": (
        lambda: ([x], x**3 + x**0.5),
        (
            "Elemwise{Composite{(Composite{(sqr(i0) * i0)}(i0) + sqrt(i0))}} [id A] ''   0\n"
            " |x [id B]\n"
        ),
    ),
    "a_plus_a_pow_10": (
        lambda: ([x], x + x**10),
        (
            "Elemwise{Composite{(i0 + Composite{(sqr(sqr(sqr(i0))) * sqr(i0))}(i0))}} [id A] ''   0\n"
            " |x [id B]\n"
        ),
    ),
    "inverse_cube": (
        lambda: ([x], x**-3),
        ("Elemwise{Composite{inv(Composite{(sqr(i0) * i0)}(i0))}} [id A] ''   0\n |x [id B]\n"),
    ),
    "reciprocal": (
        lambda: ([x], x**-1 + 1),
        (
            "Elemwise{Composite{(i0 + inv(i1))}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 1.0} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "cube_times_two": (
        lambda: ([x], x**3 * 2),
        (
            "Elemwise{Composite{(i0 * Composite{(sqr(i0) * i0)}(i1))}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 2.0} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "transpose_product": (
        lambda: ([m, n], T.dot(m.T, n)),
        (
            "Dot22 [id A] ''   1\n"
            " |InplaceDimShuffle{1,0} [id B] 'm.T'   0\n"
            " | |m [id C]\n"
            " |n [id D]\n"
        ),
    ),
    "mean_crossentropy": (
        lambda: ([m, i], T.nnet.categorical_crossentropy(T.nnet.softmax(m), i).mean()),
        (
            "Elemwise{Composite{(i0 / Cast{float64}(i1))}}[(0, 0)] [id A] 'mean'   5\n"
            " |Sum{acc_dtype=float64} [id B] ''   4\n"
            " | |CrossentropySoftmaxArgmax1HotWithBias.0 [id C] ''   3\n"
            " |   |m [id D]\n"
            " |   |Elemwise{second,no_inplace} [id E] ''   2\n"
            " |   | |Subtensor{int64} [id F] ''   1\n"
            " |   | | |m [id D]\n"
            " |   | | |Constant{0} [id G]\n"
            " |   | |TensorConstant{(1,) of 0.0} [id H]\n"
            " |   |i [id I]\n"
            " |Shape_i{0} [id J] ''   0\n"
            "   |m [id D]\n"
        ),
    ),
    "tanh_layer_shared": (
        lambda: ([m], T.tanh(T.dot(m, W) + bb).sum()),
        (
            "Sum{acc_dtype=float64} [id A] ''   3\n"
            " |Elemwise{Composite{tanh((i0 + i1))}}[(0, 0)] [id B] ''   2\n"
            "   |Dot22 [id C] ''   1\n"
            "   | |m [id D]\n"
            "   | |W [id E]\n"
            "   |InplaceDimShuffle{x,0} [id F] ''   0\n"
            "     |bb [id G]\n"
        ),
    ),
    "l2_and_l1": (
        lambda: ([m], (m**2).sum() + abs(m).sum()),
        (
            "Elemwise{Add}[(0, 0)] [id A] ''   4\n"
            " |Sum{acc_dtype=float64} [id B] ''   3\n"
            " | |Elemwise{sqr,no_inplace} [id C] ''   2\n"
            " |   |m [id D]\n"
            " |Sum{acc_dtype=float64} [id E] ''   1\n"
            "   |Elemwise{abs_,no_inplace} [id F] ''   0\n"
            "     |m [id D]\n"
        ),
    ),
    "row_norm": (
        lambda: ([m], m / T.sqrt((m**2).sum(axis=1, keepdims=True))),
        (
            "Elemwise{true_div,no_inplace} [id A] ''   4\n"
            " |m [id B]\n"
            " |Elemwise{Sqrt}[(0, 0)] [id C] ''   3\n"
            "   |InplaceDimShuffle{0,x} [id D] ''   2\n"
            "     |Sum{axis=[1], acc_dtype=float64} [id E] ''   1\n"
            "       |Elemwise{sqr,no_inplace} [id F] ''   0\n"
            "         |m [id B]\n"
        ),
    ),
    "softmax_grad": (
        lambda: ([m], T.grad(T.nnet.softmax(m)[0, 0], m)),
        (
            "SoftmaxGrad [id A] ''   5\n"
            " |IncSubtensor{InplaceInc;int64, int64} [id B] ''   4\n"
            " | |Alloc [id C] ''   3\n"
            " | | |TensorConstant{(1, 1) of 0.0} [id D]\n"
            " | | |Shape_i{0} [id E] ''   2\n"
            " | | | |m [id F]\n"
            " | | |Shape_i{1} [id G] ''   1\n"
            " | |   |m [id F]\n"
            " | |TensorConstant{1.0} [id H]\n"
            " | |Constant{0} [id I]\n"
            " | |Constant{0} [id I]\n"
            " |Softmax [id J] ''   0\n"
            "   |m [id F]\n"
        ),
    ),
    "max_minus_min": (
        lambda: ([m], T.max(m, axis=0) - T.min(m, axis=0)),
        (
            "Elemwise{Sub}[(0, 0)] [id A] ''   2\n"
            " |Reduce{maximum}{0} [id B] 'max'   1\n"
            " | |m [id C]\n"
            " |Reduce{minimum}{0} [id D] ''   0\n"
            "   |m [id C]\n"
        ),
    ),
    "tanh_grad": (
        lambda: ([x], T.grad(T.tanh(x).sum(), x)),
        (
            "Elemwise{Composite{(i0 - sqr(tanh(i1)))}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 1.0} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "log_softmax": (
        lambda: ([m], T.log(T.nnet.softmax(m))),
        ("LogSoftmax [id A] ''   0\n |m [id B]\n"),
    ),
    "std": (
        lambda: ([m], m.std(axis=0)),
        (
            "Elemwise{Composite{sqrt((i0 / i1))}}[(0, 0)] [id A] 'std'   9\n"
            " |Sum{axis=[0], acc_dtype=float64} [id B] ''   8\n"
            " | |Elemwise{Composite{sqr((i0 - i1))}} [id C] ''   7\n"
            " |   |m [id D]\n"
            " |   |Elemwise{TrueDiv}[(0, 0)] [id E] 'mean'   6\n"
            " |     |InplaceDimShuffle{x,0} [id F] ''   3\n"
            " |     | |Sum{axis=[0], acc_dtype=float64} [id G] ''   1\n"
            " |     |   |m [id D]\n"
            " |     |InplaceDimShuffle{x,x} [id H] ''   5\n"
            " |       |Elemwise{Cast{float64}} [id I] ''   2\n"
            " |         |Shape_i{0} [id J] ''   0\n"
            " |           |m [id D]\n"
            " |InplaceDimShuffle{x} [id K] ''   4\n"
            "   |Elemwise{Cast{float64}} [id I] ''   2\n"
        ),
    ),
    "concatenate": (
        lambda: ([m, n], T.concatenate([m, n], axis=1)),
        ("Join [id A] ''   0\n |TensorConstant{1} [id B]\n |m [id C]\n |n [id D]\n"),
    ),
    "cumsum": (
        lambda: ([x], T.cumsum(x) + 1),
        (
            "Elemwise{Add}[(0, 1)] [id A] ''   1\n"
            " |TensorConstant{(1,) of 1.0} [id B]\n"
            " |CumOp{None, add} [id C] ''   0\n"
            "   |x [id D]\n"
        ),
    ),
    "one_over": (
        lambda: ([x], 1 / (x + 2)),
        (
            "Elemwise{Composite{inv((i0 + i1))}} [id A] ''   0\n"
            " |TensorConstant{(1,) of 2.0} [id B]\n"
            " |x [id C]\n"
        ),
    ),
    "prod": (
        lambda: ([x], T.prod(x)),
        ("Prod{axis=None, dtype='float64', acc_dtype='float64'} [id A] ''   0\n |x [id B]\n"),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_graph_prints_as_theano(name):
    build, expected = CASES[name]
    inputs, output = build()
    f = theano.function(inputs, output)
    assert theano.printing.debugprint(f, file="str") == expected


#: Theano 1.0.5's "Inner graphs of the scan ops" block of a compiled RNN step (without its
#: header and ids: the outer graphs differ, Theano's buffers being built in the graph).
THEANO_SCAN_INNER = [
    " >Elemwise{Composite{exp((tanh(((i0 * i1) + i2)) * i3))}} ''",
    " > |h0[t-1] ->",
    " > |a_copy ->",
    " > |x[t] ->",
    " > |w_copy ->",
]


def test_scan_inner_graph_prints_as_theano():
    import re

    xs, a, h0 = T.dmatrix("x"), T.dvector("a"), T.dvector("h0")
    w = theano.shared(np.ones(3), name="w")
    out, _ = theano.scan(
        lambda xt, h, a: T.exp(T.tanh(h * a + xt) * w),
        sequences=[xs],
        outputs_info=[h0],
        non_sequences=[a],
    )
    f = theano.function([xs, a, h0], out)
    text = theano.printing.debugprint(f, file="str")
    block = text.split("Inner graphs of the scan ops:\n\n")[1].splitlines()[1:]
    assert [re.sub(r" ?\[id [A-Z]+\]", "", line).rstrip() for line in block] == THEANO_SCAN_INNER
